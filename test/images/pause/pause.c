/* The pod sandbox process of the local cluster's real nodes (containerd's
 * sandbox_image): holds the pod's namespaces, reaps orphaned children, and
 * exits 0 on SIGINT or SIGTERM. Built static; the image holds nothing else
 * but the static-image base (test/images/pause/build.ts). */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  struct sigaction a = {0};
  a.sa_handler = stop;
  sigaction(SIGINT, &a, NULL);
  sigaction(SIGTERM, &a, NULL);
  a.sa_handler = reap;
  a.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  sigaction(SIGCHLD, &a, NULL);
  for (;;) pause();
}
