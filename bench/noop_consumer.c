#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_partition_list_s rd_kafka_topic_partition_list_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct { int err; void *rkt; int32_t partition; void *payload; size_t len;
                 void *key; size_t key_len; int64_t offset; void *_private; } rd_kafka_message_t;
rd_kafka_conf_t *rd_kafka_conf_new(void);
int rd_kafka_conf_set(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
rd_kafka_t *rd_kafka_new(int, rd_kafka_conf_t *, char *, size_t);
int rd_kafka_poll_set_consumer(rd_kafka_t *);
rd_kafka_topic_partition_list_t *rd_kafka_topic_partition_list_new(int);
void *rd_kafka_topic_partition_list_add(rd_kafka_topic_partition_list_t *, const char *, int32_t);
int rd_kafka_assign(rd_kafka_t *, const rd_kafka_topic_partition_list_t *);
rd_kafka_message_t *rd_kafka_consumer_poll(rd_kafka_t *, int);
void rd_kafka_message_destroy(rd_kafka_message_t *);
int rd_kafka_consumer_close(rd_kafka_t *);
void rd_kafka_destroy(rd_kafka_t *);
rd_kafka_topic_t *rd_kafka_topic_new(rd_kafka_t *, const char *, void *);
rd_kafka_queue_t *rd_kafka_queue_new(rd_kafka_t *);
int rd_kafka_consume_start_queue(rd_kafka_topic_t *, int32_t, int64_t, rd_kafka_queue_t *);
int rd_kafka_consume_callback_queue(rd_kafka_queue_t *, int, void (*)(rd_kafka_message_t *, void *), void *);

static long got = 0;
static double first = 0, last = 0;

static double now(void);

static void on_message(rd_kafka_message_t *m, void *opaque) {
    (void)opaque;
    if (m->err == 0) { if (!got) first = now(); got++; last = now(); }
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

/* noop MODE BOOTSTRAP TOPIC PARTITIONS RECORDS: read RECORDS records from the
   beginning, doing nothing with them; print "records seconds" (first record to last).
   MODE "callback": the simple consumer's queue callback (the API kcat's -C uses);
   MODE "poll": the high-level consumer, rd_kafka_consumer_poll + message_destroy per
   record. Prototypes are declared here: Debian has librdkafka1 but not its headers. */
int main(int argc, char **argv) {
    char err[512];
    if (argc != 6) { fprintf(stderr, "usage: noop callback|poll bootstrap topic partitions records\n"); return 2; }
    int poll_mode = argv[1][0] == 'p';
    argv++;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {{"bootstrap.servers", argv[1]}, {"fetch.max.bytes", "52428800"},
                           {"group.id", "noop-bench"}, {"enable.auto.commit", "false"},
                           {"auto.offset.reset", "earliest"}};
    for (int i = 0; i < 5; i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
    rd_kafka_t *rk = rd_kafka_new(1 /* consumer */, conf, err, sizeof err);
    if (!rk) { fprintf(stderr, "%s\n", err); return 1; }
    int parts = atoi(argv[3]);
    long want = atol(argv[4]);
    double deadline = now() + 300;
    if (!poll_mode) {
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, argv[2], NULL);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        for (int p = 0; p < parts; p++) rd_kafka_consume_start_queue(rkt, p, -2 /* beginning */, q);
        while (got < want && now() < deadline) rd_kafka_consume_callback_queue(q, 100, on_message, NULL);
        printf("%ld %.6f\n", got, last - first);
        return got == want ? 0 : 1;  /* exit without teardown: nothing left to measure */
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++) rd_kafka_topic_partition_list_add(list, argv[2], p);
    rd_kafka_assign(rk, list);
    while (got < want && now() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (m->err == 0) { if (!got) first = now(); got++; last = now(); }
        rd_kafka_message_destroy(m);
    }
    printf("%ld %.6f\n", got, last - first);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return got == want ? 0 : 1;
}
