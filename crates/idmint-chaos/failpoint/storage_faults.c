/* storage_faults.c: an LD_PRELOAD failpoint of the idmint chaos harness (reliability T20),
 * compiled with gcc when a scenario needs it. While the file named by $CHAOS_FAIL_FILE holds
 * "eio", fsync and fdatasync of files under $CHAOS_FAIL_PATH fail with EIO; while it holds
 * "enospc", those calls and write(2) to such files fail with ENOSPC (a full disk). Anything
 * else (or no file) passes every call through. Only the harness's own server processes load
 * it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* 0: pass; EIO or ENOSPC: fail with it. */
static int failing(int fd) {
  const char *file = getenv("CHAOS_FAIL_FILE");
  const char *path = getenv("CHAOS_FAIL_PATH");
  if (file == NULL || path == NULL) return 0;
  int control = open(file, O_RDONLY | O_CLOEXEC);
  if (control < 0) return 0;
  char mode[16] = {0};
  ssize_t n = read(control, mode, sizeof mode - 1);
  close(control);
  if (n <= 0) return 0;
  int error = strncmp(mode, "eio", 3) == 0 ? EIO : strncmp(mode, "enospc", 6) == 0 ? ENOSPC : 0;
  if (error == 0) return 0;
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t len = readlink(link, target, sizeof target - 1);
  if (len <= 0) return 0;
  target[len] = 0;
  return strncmp(target, path, strlen(path)) == 0 ? error : 0;
}

int fsync(int fd) {
  static int (*real)(int);
  int error = failing(fd);
  if (error) { errno = error; return -1; }
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  int error = failing(fd);
  if (error) { errno = error; return -1; }
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  return real(fd);
}

ssize_t write(int fd, const void *buf, size_t count) {
  static ssize_t (*real)(int, const void *, size_t);
  if (failing(fd) == ENOSPC) { errno = ENOSPC; return -1; }
  if (real == NULL) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  return real(fd, buf, count);
}
