/* task-names.c: the name of an asyncio task, for its context: Task.get_name() of the
 * task asyncio runs now, asked once per task through C methods only, so no Python code
 * runs and the GIL is never dropped while the hook is in the middle of its work (the
 * control thread could otherwise take the hook off and free this thread's state). GIL
 * held. */
#define _GNU_SOURCE
#include <string.h>

#include "hook.h"

/* The names pl_py_name_task looks up, interned on first use (a C string made a new str at
 * every lookup, four per task). */
enum {
	S_ASYNCIO,
	S_CASYNCIO,
	S_CURRENT_TASK,
	S_GET_RUNNING_LOOP,
	S_CURRENT_TASKS,
	S_GET_CORO,
	S_GET_NAME,
	S_COUNT
};
static const char *const str_text[S_COUNT] = {
    "asyncio",	      "_asyncio", "current_task", "get_running_loop",
    "_current_tasks", "get_coro", "get_name",
};
static PyObject *strs[S_COUNT];

static PyObject *str(int i)
{
	if (!strs[i])
		strs[i] = PyUnicode_InternFromString(str_text[i]);
	return strs[i];
}

/* Calls obj.name() only when it is implemented in C. New reference or NULL. */
static PyObject *call_c_method(PyObject *obj, int name)
{
	PyObject *m = str(name) ? PyObject_GetAttr(obj, strs[name]) : NULL;
	PyObject *r = m && PyCFunction_Check(m) ? PyObject_CallNoArgs(m) : NULL;
	Py_XDECREF(m);
	return r;
}

/* asyncio's C Task type (_asyncio.Task), once seen, and its C methods, by name, looked
 * up once (strong references, kept for the process's life). */
static PyTypeObject *c_task_type;
static PyObject *c_task_methods[S_COUNT];

/* task.name() for a task of exactly asyncio's C Task type, whose methods are C: the
 * method descriptor called with the task (no lookup through the type's MRO, no bound
 * method made), as call_c_method would otherwise. */
static PyObject *call_task_method(PyObject *task, int name)
{
	if (!c_task_type && strcmp(Py_TYPE(task)->tp_name, "_asyncio.Task") == 0)
		c_task_type = Py_TYPE(task);
	if (Py_TYPE(task) != c_task_type || !str(name))
		return call_c_method(task, name);
	PyObject *m = c_task_methods[name];
	if (!m) {
		m = PyObject_GetAttr((PyObject *)c_task_type, strs[name]);
		if (!m || !Py_IS_TYPE(m, &PyMethodDescr_Type)) {
			Py_XDECREF(m);
			return call_c_method(task, name);
		}
		c_task_methods[name] = m;
	}
	PyObject *args[1] = {task};
	return PyObject_Vectorcall(m, args, 1, NULL);
}

/* What current_task uses, looked up once their module is imported and kept for the
 * process's life (a strong reference): asyncio.current_task (C from 3.12; a Python
 * function before, never called), _asyncio.get_running_loop and _asyncio._current_tasks
 * (a dict that lives as long as its module). */
static PyObject *cur_task_fn, *get_loop_fn, *cur_tasks;

/* *slot, or module.name once the module is imported (NULL before; an error may be
 * set). */
static PyObject *module_attr(PyObject **slot, int module, int name)
{
	if (*slot)
		return *slot;
	PyObject *m = str(module) ? PyImport_GetModule(strs[module]) : NULL;
	*slot = m && str(name) ? PyObject_GetAttr(m, strs[name]) : NULL;
	Py_XDECREF(m);
	return *slot;
}

/* asyncio's running task: asyncio.current_task where it is C (3.12+), else the C
 * module's own table, _asyncio._current_tasks[get_running_loop()]. New reference or
 * NULL (an error may be set). */
static PyObject *current_task(void)
{
	PyObject *f = module_attr(&cur_task_fn, S_ASYNCIO, S_CURRENT_TASK);
	PyObject *task = f && PyCFunction_Check(f) ? PyObject_CallNoArgs(f) : NULL;
	if (task)
		return task;
	f = module_attr(&get_loop_fn, S_CASYNCIO, S_GET_RUNNING_LOOP);
	PyObject *loop = f && PyCFunction_Check(f) ? PyObject_CallNoArgs(f) : NULL;
	PyObject *tasks = loop ? module_attr(&cur_tasks, S_CASYNCIO, S_CURRENT_TASKS) : NULL;
	if (tasks && PyDict_CheckExact(tasks)) {
		task = PyDict_GetItemWithError(tasks, loop);
		Py_XINCREF(task);
	}
	Py_XDECREF(loop);
	return task;
}

PyObject *pl_py_task_coro(PyObject *task)
{
	return call_task_method(task, S_GET_CORO);
}

/* Calls into Python once per task; the hook is off meanwhile (CPython does not trace
 * its own profile hook). */
void pl_py_name_task(PyObject *coro, char *buf, size_t len, uint64_t *id, const char **rt)
{
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	PyObject *task = current_task();
	if (task && task != Py_None) {
		PyObject *c = call_task_method(task, S_GET_CORO);
		if (c == coro) {
			PyObject *nm = call_task_method(task, S_GET_NAME);
			const char *s = nm && PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : NULL;
			if (s) {
				copy_name(buf, len, s);
				*id = (uint64_t)(uintptr_t)task;
				*rt = "asyncio";
			}
			Py_XDECREF(nm);
		}
		Py_XDECREF(c);
	}
	Py_XDECREF(task);
	pl_py_exc_restore(&e);
}
