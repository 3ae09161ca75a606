/* The lab's pod sandbox ("pause") process, built by build.sh with gcc -static into rkl.local/pause:1: it holds the
 * pod's namespaces, reaps the children a shared PID namespace hands it, and exits 0 on SIGTERM or SIGINT. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) { write(1, "pause (rkl.local) 1\n", 20); return 0; }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  sigaction(SIGCHLD, &sa, NULL);
  for (;;) pause();
}
