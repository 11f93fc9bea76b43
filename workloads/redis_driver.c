/* redis driver: a request-serving program under load. Starts Debian's redis-server (under the allocator being
 * measured: it inherits LD_PRELOAD) on a loopback port of its own, without persistence, drives it with
 * redis-benchmark (under plain glibc: the client is not what is measured, so LD_PRELOAD is dropped for it), then
 * asks the server how many calls of each command it served and shuts it down without saving. Its log is written
 * to the scratch folder (the current directory) and removed; on failure it is passed on to stderr first.
 *
 * usage: redis-driver SCALE REDIS-SERVER REDIS-BENCHMARK
 * SCALE 1 sends 10,000 requests for each of the benchmark's tests (TESTS below) from 50 clients, 4 pipelined.
 * Prints, before the checksum line:
 *   metric requests_per_s=<all requests over the client's wall time, from its start to its exit>
 *   metric p50_ms=<geometric mean over the tests of each test's median latency>
 *   metric p99_ms=<the same of each test's 99th percentile>
 * The checksum hashes the server's own count of calls per data command (INFO commandstats): it depends only on
 * the scale, and shows the server served every request. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "wl_common.h"

extern char **environ;

#define TESTS "set,get,incr,lpush,rpop,sadd,hset,lrange_100,mset"
#define FULL_REQUESTS 10000
#define MAX_REPLY (1 << 16)

/* the commands TESTS send, and in how many of its tests (lrange_100 first fills its list with an lpush test) */
static const struct served {
    const char *name;
    long tests;
} SERVED[] = {{"set", 1}, {"get", 1}, {"incr", 1}, {"lpush", 2}, {"rpop", 1}, {"sadd", 1}, {"hset", 1},
              {"lrange", 1}, {"mset", 1}, {NULL, 0}};

static pid_t server = -1;

#define SERVER_LOG "redis-server.log"

/* The server's log to stderr (after the driver's own message, which the harness reports), then away: a workload
 * leaves nothing in its scratch folder. */
static void pass_on_log(void)
{
    FILE *log = fopen(SERVER_LOG, "r");
    char line[512];
    while (log && fgets(line, sizeof line, log))
        fputs(line, stderr);
    if (log)
        fclose(log);
    unlink(SERVER_LOG);
}

static void die(const char *what)
{
    fprintf(stderr, "redis-driver: error: %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
    pass_on_log();
    exit(1);
}

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        die("no free loopback port");
    close(fd);
    return ntohs(a.sin_port);
}

static int connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Sends one command (RESP array of words) and reads the reply until `done` says it is whole. */
static size_t command(int fd, char *reply, const char *const *words, int n)
{
    char buf[512];
    int len = snprintf(buf, sizeof buf, "*%d\r\n", n);
    for (int i = 0; i < n; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "$%zu\r\n%s\r\n", strlen(words[i]), words[i]);
    if (write(fd, buf, (size_t)len) != len)
        die("cannot send a command to redis-server");
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, reply + got, MAX_REPLY - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        reply[got] = '\0';
        if (reply[0] != '$' && strstr(reply, "\r\n"))
            break;
        if (reply[0] == '$') { /* bulk string: its length, then the body and a final CRLF */
            char *body = strstr(reply, "\r\n");
            if (body && got >= (size_t)(body - reply) + 2 + (size_t)atol(reply + 1) + 2)
                break;
        }
        if (got >= MAX_REPLY - 1)
            die("reply of redis-server too long");
    }
    reply[got] = '\0';
    return got;
}

static pid_t spawn(char **argv, char **env, int out_fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out_fd, 1);
        execve(argv[0], argv, env);
        fprintf(stderr, "redis-driver: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (pid < 0)
        die("fork");
    return pid;
}

static int start_server(const char *path)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int port = free_port();
        char port_s[16];
        snprintf(port_s, sizeof port_s, "%d", port);
        char *argv[] = {(char *)path, "--port", port_s, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", ".", "--daemonize", "no", "--loglevel", "warning", "--logfile", SERVER_LOG,
                        "--databases", "1", "--io-threads", "1", "--always-show-logo", "no", NULL};
        server = spawn(argv, environ, 2); /* stdout holds the metrics and the checksum alone */
        for (int i = 0; i < 1000; i++) {
            int fd = connect_to(port);
            if (fd >= 0) {
                close(fd);
                return port;
            }
            if (waitpid(server, NULL, WNOHANG) == server)
                break; /* it could not listen (the port was taken meanwhile): another port */
            usleep(5000);
        }
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
        server = -1;
    }
    errno = 0;
    die("redis-server did not start listening");
    return -1;
}

/* The value of CSV field `k` (0-based, quoted) of a line, or NAN. */
static double csv_field(const char *line, int k)
{
    for (int i = 0; i < k; i++) {
        line = strstr(line, "\",\"");
        if (!line)
            return NAN;
        line += 2;
    }
    return strtod(line + 1, NULL);
}

int main(int argc, char **argv)
{
    double scale = wl_scale(argc, argv);
    if (argc != 4) {
        fprintf(stderr, "usage: %s SCALE REDIS-SERVER REDIS-BENCHMARK\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int port = start_server(argv[2]);
    char port_s[16], n_s[24];
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(n_s, sizeof n_s, "%ld", wl_scaled(scale, FULL_REQUESTS));

    char **client_env = calloc(1, sizeof(char *));
    int n_env = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "HEAPCOST_WHO=", 13)) {
            client_env = realloc(client_env, (size_t)(n_env + 2) * sizeof(char *));
            client_env[n_env++] = *e;
            client_env[n_env] = NULL;
        }
    int pipefd[2];
    if (pipe(pipefd) != 0)
        die("pipe");
    char *bench[] = {argv[3], "-h", "127.0.0.1", "-p", port_s, "-n", n_s, "-c", "50", "-P", "4", "-d", "128",
                     "-r", "100000", "-t", TESTS, "--csv", NULL};
    double started = wl_now();
    pid_t client = spawn(bench, client_env, pipefd[1]);
    close(pipefd[1]);
    FILE *csv = fdopen(pipefd[0], "r");
    char line[1024];
    double requests = 0, log_p50 = 0, log_p99 = 0;
    int tests = 0;
    long per_test = atol(n_s);
    while (fgets(line, sizeof line, csv)) {
        if (!strncmp(line, "\"test\"", 6))
            continue;
        double p50 = csv_field(line, 4), p99 = csv_field(line, 6);
        requests += (double)per_test;
        if (!(p50 > 0) || !(p99 > 0))
            continue; /* a latency of 0 ms at the benchmark's precision: left out of the means */
        log_p50 += log(p50);
        log_p99 += log(p99);
        tests++;
    }
    fclose(csv);
    int status;
    pid_t reaped = waitpid(client, &status, 0);
    double seconds = wl_now() - started; /* the benchmark's own rps is whole milliseconds per test: too coarse */
    if (reaped != client || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || tests == 0) {
        errno = 0;
        die("redis-benchmark failed");
    }

    int fd = connect_to(port);
    if (fd < 0)
        die("cannot reach redis-server after the benchmark");
    char *reply = malloc(MAX_REPLY);
    const char *info[] = {"INFO", "commandstats"};
    command(fd, reply, info, 2);
    /* cmdstat_<name>:calls=<n>,...: every command must have been served at least as often as the benchmark's
     * tests asked (a pipelining client may send a few more: its last batch is whole, so the exact count varies);
     * the checksum hashes the commands and those required counts, which depend on the scale alone */
    uint64_t h = WL_FNV_INIT;
    for (const struct served *c = SERVED; c->name; c++) {
        char key[64];
        snprintf(key, sizeof key, "cmdstat_%s:calls=", c->name);
        char *p = strstr(reply, key);
        long calls = p ? atol(p + strlen(key)) : 0;
        if (calls < c->tests * per_test) {
            fprintf(stderr, "redis-driver: error: redis-server served %ld %s calls of %ld sent\n", calls, c->name,
                    c->tests * per_test);
            errno = 0;
            die("a request was not served");
        }
        h = wl_fnv_u64(wl_fnv_bytes(h, c->name, strlen(c->name)), (uint64_t)(c->tests * per_test));
    }
    const char *shutdown[] = {"SHUTDOWN", "NOSAVE"};
    command(fd, reply, shutdown, 2);
    close(fd);
    if (waitpid(server, &status, 0) != server || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        errno = 0;
        server = -1;
        die("redis-server did not exit cleanly after SHUTDOWN NOSAVE");
    }
    unlink(SERVER_LOG);
    printf("metric requests_per_s=%.1f\n", requests / seconds);
    printf("metric p50_ms=%.4f\n", exp(log_p50 / tests));
    printf("metric p99_ms=%.4f\n", exp(log_p99 / tests));
    wl_print_checksum(h);
    return 0;
}
