// audit.c: untrusted mode, a PEP 578 audit hook installed from C. While a
// thread runs an untrusted call (sky_thread.untrusted), it refuses process
// creation, signals to other processes, ctypes, and writes outside the
// allowed directories. The hook is process-wide and cannot be removed, so
// it is installed once and checks the calling thread's flag. Audit hooks
// added before start-up serve the interpreter from its first line of Python.
#include "host.h"
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char **write_dirs;      // absolute, resolved directories writes may go to
static int any_untrusted;      // untrusted code has run: threads it may have started are untrusted too
static int n_write_dirs;
static PyThread_type_lock dirs_lock;

static const char *denied_prefixes[] = {"os.exec", "os.spawn", "os.posix_spawn", "ctypes.", NULL};
static const char *denied_events[] = {"subprocess.Popen", "os.system", "os.fork", "os.forkpty",
                                      "os.kill", "os.killpg", "signal.pthread_kill", "os.startfile",
                                      "pty.spawn", NULL};
// Events whose first argument is a path being changed.
static const char *write_events[] = {"os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir",
                                     "os.mkdir", "os.chmod", "os.chown", "os.link", "os.symlink",
                                     "os.truncate", "os.utime", "shutil.rmtree", "shutil.move",
                                     "shutil.copyfile", NULL};

// sky_allow_writes adds a directory writes may go to in untrusted mode.
int sky_allow_writes(const char *dir) {
    char resolved[PATH_MAX];
    if (!realpath(dir, resolved)) return -1;
    if (!dirs_lock) dirs_lock = PyThread_allocate_lock();
    if (!dirs_lock) return -1;
    PyThread_acquire_lock(dirs_lock, WAIT_LOCK);
    char **d = realloc(write_dirs, (size_t)(n_write_dirs + 1) * sizeof *d);
    if (d) {
        write_dirs = d;
        write_dirs[n_write_dirs++] = strdup(resolved);
    }
    PyThread_release_lock(dirs_lock);
    return d ? 0 : -1;
}

// allowed_path resolves path (its directory, since the file may not exist
// yet) and checks it lies in an allowed directory.
static int allowed_path(const char *path) {
    char buf[PATH_MAX], dir[PATH_MAX], resolved[PATH_MAX];
    if (path[0] != '/') {
        if (!getcwd(buf, sizeof buf)) return 0;
        size_t n = strlen(buf);
        if (n + 1 + strlen(path) >= sizeof buf) return 0;
        buf[n] = '/';
        strcpy(buf + n + 1, path);
    } else {
        if (strlen(path) >= sizeof buf) return 0;
        strcpy(buf, path);
    }
    strcpy(dir, buf);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = 0;
    else if (slash) *slash = 0;
    if (!realpath(dir, resolved)) return 0;
    int ok = 0;
    if (!dirs_lock) return 0;
    PyThread_acquire_lock(dirs_lock, WAIT_LOCK);
    for (int i = 0; i < n_write_dirs && !ok; i++) {
        size_t n = strlen(write_dirs[i]);
        ok = strncmp(resolved, write_dirs[i], n) == 0 && (resolved[n] == 0 || resolved[n] == '/' || n == 1);
    }
    PyThread_release_lock(dirs_lock);
    return ok;
}

static int deny(const char *event, const char *detail) {
    PyErr_Format(PyExc_PermissionError, "skynet untrusted mode: %s is not allowed%s%s", event,
                 detail ? ": " : "", detail ? detail : "");
    return -1;
}

// path_arg returns the UTF-8 path of an audit argument, or NULL for a file
// descriptor or something else that names no path.
static const char *path_arg(PyObject *o, PyObject **holder) {
    *holder = NULL;
    if (PyUnicode_Check(o)) return PyUnicode_AsUTF8(o); // borrowed from o
    if (PyBytes_Check(o)) return PyBytes_AS_STRING(o);  // borrowed from o
    PyObject *fs = PyOS_FSPath(o);                       // new ref, for PathLike
    if (!fs) {
        PyErr_Clear();
        return NULL;
    }
    *holder = fs;
    return PyUnicode_Check(fs) ? PyUnicode_AsUTF8(fs) : PyBytes_Check(fs) ? PyBytes_AS_STRING(fs) : NULL;
}

// cwd_moved is set when Python code changes the working directory
// (os.chdir and os.fchdir both raise "os.chdir"), so the host restores it
// only then instead of asking the kernel after every batch.
static int cwd_moved;

int sky_take_cwd_moved(void) { return __atomic_exchange_n(&cwd_moved, 0, __ATOMIC_ACQ_REL); }

// The process that must not be signalled from Python (sky_protect), and its
// process group: in a worker process, skynet itself. 0: none.
static long protected_pid, protected_pgid;

void sky_protect(long pid, long pgid) {
    __atomic_store_n(&protected_pgid, pgid, __ATOMIC_RELAXED);
    __atomic_store_n(&protected_pid, pid, __ATOMIC_RELEASE);
}

// protected_target refuses os.kill and os.killpg aimed at the protected
// process: its pid, its group (-pgid to os.kill, pgid to os.killpg), or
// every process (-1). 0 lets the call on.
static int protected_target(const char *event, PyObject *args) {
    long pid = __atomic_load_n(&protected_pid, __ATOMIC_ACQUIRE);
    if (!pid || !PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1) return 0;
    int killpg = strcmp(event, "os.killpg") == 0;
    if (!killpg && strcmp(event, "os.kill") != 0) return 0;
    long target = PyLong_AsLong(PyTuple_GET_ITEM(args, 0)); // borrowed
    if (target == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0; // not an int: os.kill raises its own error
    }
    long pgid = __atomic_load_n(&protected_pgid, __ATOMIC_RELAXED);
    int hit = killpg ? pgid > 1 && target == pgid : target == pid || target == -1 || (pgid > 1 && target == -pgid);
    if (!hit) return 0;
    PyErr_Format(PyExc_PermissionError,
                 "skynet: %s(%ld, ...) would signal skynet (pid %ld, the parent of this worker process) or its process group, "
                 "which would stop the whole run: a metric may not; raise an exception to fail this case",
                 event, target, pid);
    return -1;
}

static int audit_hook(const char *event, PyObject *args, void *data) {
    if (event[0] == 'o' && strcmp(event, "os.chdir") == 0) __atomic_store_n(&cwd_moved, 1, __ATOMIC_RELEASE);
    if (event[0] == 'o' && strncmp(event, "os.kill", 7) == 0 && protected_target(event, args) < 0) return -1;
    sky_thread *t = sky_current_thread();
    // A thread Skynet did not make (no sky_thread) was started by Python
    // code: once untrusted code has run, it may be untrusted code's.
    int untrusted = t ? t->untrusted : __atomic_load_n(&any_untrusted, __ATOMIC_RELAXED);
    if (!untrusted) return 0;
    for (int i = 0; denied_events[i]; i++)
        if (strcmp(event, denied_events[i]) == 0) return deny(event, NULL);
    for (int i = 0; denied_prefixes[i]; i++)
        if (strncmp(event, denied_prefixes[i], strlen(denied_prefixes[i])) == 0) return deny(event, NULL);
    if (strcmp(event, "import") == 0 && PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 0) {
        PyObject *name = PyTuple_GET_ITEM(args, 0); // borrowed
        if (PyUnicode_Check(name) && (PyUnicode_CompareWithASCIIString(name, "ctypes") == 0 ||
                                      PyUnicode_CompareWithASCIIString(name, "_ctypes") == 0))
            return deny("import ctypes", NULL);
        return 0;
    }
    int writes = 0;
    if (strcmp(event, "open") == 0 && PyTuple_Check(args) && PyTuple_GET_SIZE(args) >= 3) {
        PyObject *mode = PyTuple_GET_ITEM(args, 1), *flags = PyTuple_GET_ITEM(args, 2); // borrowed
        if (mode != Py_None && PyUnicode_Check(mode)) {
            const char *m = PyUnicode_AsUTF8(mode);
            writes = m && strpbrk(m, "wax+") != NULL;
        }
        if (PyLong_Check(flags)) {
            long f = PyLong_AsLong(flags);
            writes = writes || (f & (O_WRONLY | O_RDWR | O_CREAT | O_APPEND | O_TRUNC));
        }
    } else {
        for (int i = 0; write_events[i]; i++)
            if (strcmp(event, write_events[i]) == 0) writes = 1;
    }
    if (!writes || !PyTuple_Check(args) || PyTuple_GET_SIZE(args) == 0) return 0;
    PyObject *holder;
    const char *path = path_arg(PyTuple_GET_ITEM(args, 0), &holder); // borrowed
    int ok = path && allowed_path(path);
    char detail[PATH_MAX + 64];
    snprintf(detail, sizeof detail, "writing to %s (outside the allowed directories)", path ? path : "a file descriptor");
    Py_XDECREF(holder);
    return ok ? 0 : deny(event, detail);
}

// sky_install_audit_hook runs before the interpreter starts (PEP 578 allows
// hooks added then), so even import-time code is covered.
int sky_install_audit_hook(void) { return PySys_AddAuditHook(audit_hook, NULL); }

// sky_set_untrusted marks the calling thread's calls (import-time code too).
void sky_set_untrusted(int on) {
    sky_thread *t = sky_current_thread();
    if (t) t->untrusted = on;
    if (on) __atomic_store_n(&any_untrusted, 1, __ATOMIC_RELAXED);
}
