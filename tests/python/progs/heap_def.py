"""heap_def.py: builtins whose PyMethodDef is allocated per function and freed with it,
as pybind11 does, here with ctypes: one def, reused for two functions in turn (names
alpha_len, then beta_len, both builtins.len's C code). alpha_len is called 300
times, beta_len 2000 times."""
import ctypes


class MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


class CFunction(ctypes.Structure):
    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p),
                ("m_ml", ctypes.POINTER(MethodDef))]


len_def = CFunction.from_address(id(len)).m_ml.contents
new_function = ctypes.pythonapi.PyCFunction_NewEx
new_function.restype = ctypes.py_object
new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
shared = MethodDef()
for name, calls in ((b"alpha_len", 300), (b"beta_len", 2000)):
    shared.ml_name, shared.ml_meth, shared.ml_flags = name, len_def.ml_meth, len_def.ml_flags
    fn = new_function(ctypes.addressof(shared), None, "mymod")
    for _ in range(calls):
        fn("abc")
    del fn
print("done")
