/* A lean load process for bench/shard_service_scale.py: the same simulated workers as its Python load process
 * (`run_load_process`), in C, so that thousands of them fit on one core and what the benchmark measures is the
 * service, not its load.
 *
 * Each worker holds a report line (TCP, past its hello), reports a packed batch every 1/rate s and asks for a
 * shard (JSON) when its shard ends; a report a seal holds is sent again 10 ms later; "wait" asks again in 0.2 s;
 * "finished" or "drained" ends the worker. One epoll loop serves every worker of the process.
 *
 * Usage: report_load HOST PORT FIRST COUNT RATE BATCH OUT LIMIT_SECS TOKEN DATASET
 * (HOST "@NAME": the line's abstract Unix socket NAME, as a ShardClient on the service's machine takes it.)
 * Writes {"reports": [seconds...], "requests": [seconds...], "resent": n} to OUT (round trips as the workers saw
 * them). Exits 2 on a usage error, 3 when the workers do not finish within LIMIT_SECS, 4 on a refused call or a
 * broken line.
 *
 * Built by the benchmark (`cc -O2`); the frames are the report line's (src/elastimator/elastic/report_line_codec.py):
 * a 4-byte big-endian length, then the body; a packed report is "R", four big-endian int64 (shard id, records,
 * lease, first record) and the data set's name; its reply "A", a sealing flag and the lease floor (int64).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

enum { IDLE, REPORTING, REQUESTING };
enum { BUFFER = 4096 };

typedef struct {
    int fd;
    char name[32];
    int state;
    int done;
    double sent_at;
    long long shard_id, start, end, lease, next_record;
    int has_shard;
    int requests_made;
    char received[BUFFER];
    size_t have;
} Worker;

typedef struct {
    double when;
    int worker;
} Due;

typedef struct {
    double *values;
    size_t count, capacity;
} Series;

static Due *heap;
static size_t heap_size, heap_capacity;

static void die(int code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "report_load: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n");
    va_end(args);
    exit(code);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void push(double when, int worker) {
    if (heap_size == heap_capacity) die(4, "more calls due than the heap holds");
    size_t i = heap_size++;
    while (i > 0 && heap[(i - 1) / 2].when > when) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = (Due){when, worker};
}

static Due pop(void) {
    Due top = heap[0], last = heap[--heap_size];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= heap_size) break;
        if (child + 1 < heap_size && heap[child + 1].when < heap[child].when) child++;
        if (heap[child].when >= last.when) break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = last;
    return top;
}

static void record(Series *series, double value) {
    if (series->count == series->capacity) {
        series->capacity = series->capacity ? 2 * series->capacity : 4096;
        series->values = realloc(series->values, series->capacity * sizeof(double));
        if (!series->values) die(4, "out of memory");
    }
    series->values[series->count++] = value;
}

static void put_be(unsigned char *out, uint64_t value, int bytes) {
    for (int i = bytes - 1; i >= 0; i--, value >>= 8) out[i] = value & 0xff;
}

static uint64_t get_be(const unsigned char *in, int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++) value = value << 8 | in[i];
    return value;
}

static void send_all(Worker *w, const unsigned char *data, size_t size) {
    while (size) {
        ssize_t sent = send(w->fd, data, size, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {  /* a frame of ~50 bytes into an empty socket buffer: not seen in practice */
                usleep(100);
                continue;
            }
            die(4, "%s: send: %s", w->name, strerror(errno));
        }
        data += sent;
        size -= sent;
    }
}

static void send_frame(Worker *w, const char *body, size_t size) {
    unsigned char frame[512];
    if (size + 4 > sizeof frame) die(4, "a frame of %zu bytes", size);
    put_be(frame, size, 4);
    memcpy(frame + 4, body, size);
    send_all(w, frame, size + 4);
}

/* The integer after "key": in a JSON object as Python's json.dumps writes it; -1 where there is none. */
static long long json_int(const char *body, const char *key) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    const char *at = strstr(body, quoted);
    return at ? strtoll(at + strlen(quoted), NULL, 10) : -1;
}

static int json_has(const char *body, const char *text) { return strstr(body, text) != NULL; }

/* A connection to the abstract Unix socket `name` (the line's "local" name), as a ShardClient on the service's
 * machine takes it. */
static int connect_local(const char *name, Worker *w) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    size_t size = strlen(name);
    if (size + 1 > sizeof address.sun_path) die(2, "a Unix socket name of %zu bytes", size);
    memcpy(address.sun_path + 1, name, size);  /* sun_path[0] stays NUL: an abstract name */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, offsetof(struct sockaddr_un, sun_path) + 1 + size) != 0)
        die(4, "%s: connect to the Unix socket @%s: %s", w->name, name, strerror(errno));
    return fd;
}

/* HOST "@NAME" takes the line's abstract Unix socket NAME (PORT unused); else TCP to HOST:PORT. */
static int connect_worker(const char *host, const char *port, const char *token, Worker *w) {
    int fd;
    if (host[0] == '@') {
        fd = connect_local(host + 1, w);
    } else {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found;
        if (getaddrinfo(host, port, &hints, &found) != 0) die(4, "no address for %s:%s", host, port);
        fd = socket(found->ai_family, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, found->ai_addr, found->ai_addrlen) != 0)
            die(4, "%s: connect to %s:%s: %s", w->name, host, port, strerror(errno));
        freeaddrinfo(found);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    w->fd = fd;
    char hello[256];
    int size = snprintf(hello, sizeof hello, "{\"token\": \"%s\", \"worker\": \"%s\"}", token, w->name);
    send_frame(w, hello, size);
    unsigned char head[4];
    char body[BUFFER];
    if (recv(fd, head, 4, MSG_WAITALL) != 4) die(4, "%s: no answer to the hello", w->name);
    size_t length = get_be(head, 4);
    if (length >= sizeof body || recv(fd, body, length, MSG_WAITALL) != (ssize_t)length)
        die(4, "%s: a broken answer to the hello", w->name);
    body[length] = 0;
    if (!json_has(body, "\"packed\": [\"report\"]"))
        die(4, "%s: the service's report line does not take packed reports: %s", w->name, body);
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 11) die(2, "usage: report_load HOST PORT FIRST COUNT RATE BATCH OUT LIMIT_SECS TOKEN DATASET");
    const char *host = argv[1], *port = argv[2], *out = argv[7], *token = argv[9], *dataset = argv[10];
    int first = atoi(argv[3]), count = atoi(argv[4]);
    double period = 1.0 / atof(argv[5]), limit = atof(argv[8]);
    long long batch = atoll(argv[6]);
    size_t name_size = strlen(dataset);
    if (count <= 0 || period <= 0 || batch <= 0 || name_size > 256) die(2, "bad arguments");

    Worker *workers = calloc(count, sizeof(Worker));
    heap_capacity = 4 * (size_t)count + 16;  /* a worker has one call due at a time, two as a reply lands */
    heap = calloc(heap_capacity, sizeof(Due));
    int poll = epoll_create1(0);
    if (!workers || !heap || poll < 0) die(4, "no memory or no epoll");
    for (int i = 0; i < count; i++) {
        Worker *w = &workers[i];
        snprintf(w->name, sizeof w->name, "w%d", first + i);
        connect_worker(host, port, token, w);
        struct epoll_event event = {.events = EPOLLIN, .data.u32 = i};
        if (epoll_ctl(poll, EPOLL_CTL_ADD, w->fd, &event) != 0) die(4, "epoll_ctl: %s", strerror(errno));
    }

    Series reports = {0}, requests = {0};
    long long resent = 0;
    int remaining = count;
    double started = now();
    for (int i = 0; i < count; i++) push(started + period * i / count, i);  /* spread over one step's period */
    struct epoll_event events[512];
    unsigned char report[4 + 33 + 256];

    while (remaining > 0) {
        double t = now();
        if (t - started > limit) die(3, "workers %d..%d did not finish within %.0f s", first, first + count - 1, limit);
        while (heap_size && heap[0].when <= t) {
            Worker *w = &workers[pop().worker];
            if (w->done || w->state != IDLE) continue;
            if (!w->has_shard) {
                char body[256];
                int size = snprintf(body, sizeof body,
                                    "{\"method\": \"request\", \"dataset\": \"%s\", \"worker\": \"%s\", "
                                    "\"request_id\": \"%s-%d\"}", dataset, w->name, w->name, ++w->requests_made);
                send_frame(w, body, size);
                w->state = REQUESTING;
            } else {
                long long records = w->end - w->next_record < batch ? w->end - w->next_record : batch;
                put_be(report, 33 + name_size, 4);
                report[4] = 'R';
                put_be(report + 5, w->shard_id, 8);
                put_be(report + 13, records, 8);
                put_be(report + 21, w->lease, 8);
                put_be(report + 29, w->next_record, 8);
                memcpy(report + 37, dataset, name_size);
                send_all(w, report, 37 + name_size);
                w->state = REPORTING;
            }
            w->sent_at = t;
        }
        double wait = heap_size ? heap[0].when - now() : 0.05;
        int timeout_ms = wait <= 0 ? 0 : wait > 0.05 ? 50 : (int)(wait * 1000) + 1;
        int ready = epoll_wait(poll, events, 512, timeout_ms);
        if (ready < 0 && errno != EINTR) die(4, "epoll_wait: %s", strerror(errno));
        for (int e = 0; e < ready; e++) {
            Worker *w = &workers[events[e].data.u32];
            ssize_t got = recv(w->fd, w->received + w->have, BUFFER - 1 - w->have, 0);
            if (got <= 0) die(4, "the service closed %s's line", w->name);
            w->have += got;
            while (w->have >= 4 && w->have >= 4 + get_be((unsigned char *)w->received, 4)) {
                size_t length = get_be((unsigned char *)w->received, 4);
                char *body = w->received + 4;
                double arrived = now();
                if (w->state == REPORTING) {
                    if (length != 10 || body[0] != 'A') die(4, "%s: a report refused: %.*s", w->name, (int)length, body);
                    w->state = IDLE;
                    if (body[1]) {  /* a seal is pending: the same report again shortly */
                        resent++;
                        push(arrived + 0.01, w - workers);
                    } else {
                        record(&reports, arrived - w->sent_at);
                        long long records = w->end - w->next_record < batch ? w->end - w->next_record : batch;
                        w->next_record += records;
                        if (w->next_record >= w->end) w->has_shard = 0;
                        push(w->sent_at + period, w - workers);
                    }
                } else if (w->state == REQUESTING) {
                    char saved = body[length];
                    body[length] = 0;
                    w->state = IDLE;
                    if (json_has(body, "\"decision\": \"assigned\"")) {
                        record(&requests, arrived - w->sent_at);
                        w->shard_id = json_int(body, "shard_id");
                        w->start = json_int(body, "start");
                        w->end = json_int(body, "end");
                        w->lease = json_int(body, "lease");
                        w->next_record = w->start;
                        w->has_shard = 1;
                        push(arrived, w - workers);
                    } else if (json_has(body, "\"decision\": \"finished\"") || json_has(body, "\"decision\": \"drained\"")) {
                        w->done = 1;
                        remaining--;
                    } else if (json_has(body, "\"decision\": \"wait\"")) {  /* every shard is out: ask again */
                        push(arrived + 0.2, w - workers);
                    } else {
                        die(4, "%s: unexpected reply to a request: %s", w->name, body);
                    }
                    body[length] = saved;
                } else {
                    die(4, "%s: a frame nobody asked for", w->name);
                }
                w->have -= 4 + length;
                memmove(w->received, w->received + 4 + length, w->have);
            }
        }
    }

    FILE *file = fopen(out, "w");
    if (!file) die(4, "cannot write %s: %s", out, strerror(errno));
    Series *all[] = {&reports, &requests};
    const char *names[] = {"reports", "requests"};
    fprintf(file, "{");
    for (int s = 0; s < 2; s++) {
        fprintf(file, "\"%s\": [", names[s]);
        for (size_t i = 0; i < all[s]->count; i++) fprintf(file, i ? ", %.9f" : "%.9f", all[s]->values[i]);
        fprintf(file, "], ");
    }
    fprintf(file, "\"resent\": %lld}\n", resent);
    fclose(file);
    return 0;
}
