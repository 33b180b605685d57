/*
 * pgpb_measure: runs one program and reports what the kernel accounted for it alone.
 *
 *   pgpb_measure FD PROGRAM [ARG...]
 *
 * Forks, execs PROGRAM (found on PATH) with stdin, stdout and stderr as given, waits for it with
 * wait4 and writes one line to file descriptor FD: "WAITSTATUS MAXRSS_KIB UTIME_S STIME_S".
 * Exits 0 once that line is written (the program's own exit is in WAITSTATUS), 125 on an error
 * of its own. The program gets SIGKILL if pgpb_measure dies (PR_SET_PDEATHSIG).
 *
 * Why a separate process: a child's peak resident set (ru_maxrss) counts the pages it shares
 * with its parent between fork and exec, so a client forked straight from the Python tool
 * (about 40 MiB resident) would never show less than that. Forked from this small program, the
 * figure is the client's own. Build: gcc -O2 pgpb_measure.c -o pgpb_measure (scripts/build-clients).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fputs("usage: pgpb_measure FD PROGRAM [ARG...]\n", stderr);
        return 125;
    }
    char *end;
    long fd = strtol(argv[1], &end, 10);
    if (*end || fd < 0) {
        fprintf(stderr, "pgpb_measure: bad FD '%s'\n", argv[1]);
        return 125;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("pgpb_measure: fork");
        return 125;
    }
    if (pid == 0) {
        close((int) fd);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent) /* died between fork and prctl */
            _exit(125);
        execvp(argv[2], argv + 2);
        fprintf(stderr, "pgpb_measure: cannot run %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("pgpb_measure: wait4");
            return 125;
        }
    }
    char line[160];
    int n = snprintf(line, sizeof line, "%d %ld %ld.%06ld %ld.%06ld\n", status, ru.ru_maxrss,
                     (long) ru.ru_utime.tv_sec, (long) ru.ru_utime.tv_usec,
                     (long) ru.ru_stime.tv_sec, (long) ru.ru_stime.tv_usec);
    if (write((int) fd, line, n) != n) {
        perror("pgpb_measure: write");
        return 125;
    }
    return 0;
}
