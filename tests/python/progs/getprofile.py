"""getprofile.py: sys.getprofile() as the program sees it, in the main thread and a
new one: None until the program sets its own profile function, then that function
(coprof's profile function is not the program's). Prints one line of results."""
import sys
import threading


def fn(*args):
    pass


seen = [sys.getprofile()]
t = threading.Thread(target=lambda: seen.append(sys.getprofile()))
t.start()
t.join()
sys.setprofile(fn)
seen.append(sys.getprofile() is fn)
sys.setprofile(None)
seen.append(sys.getprofile())
print(seen)
