/*
 * The C writer's half of tests/channel_roundtrip.rs: writes the known sequence the Rust
 * reader checks, in three stages paced by lines on stdin, each announced on stdout.
 *   stage 1: identity, two devices, figures, phases, status, one event of every kind and
 *            an unknown one, ten samples;       then prints "ready <path>"
 *   stage 2: 5000 samples and 600 events while the reader waits; prints "flooded"
 *   stage 3: argv[1]: "clean" or "error" ends the channel; "hang" waits to be killed.
 * With argv[1] "race", it races the reader instead (see race()).
 */
#include "vramscope_channel.h"

#define GIB (UINT64_C(1) << 30)

static int expect_ok(int rc, const char *what) {
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", what, vsc_strerror(rc));
        exit(2);
    }
    return rc;
}

static void wait_line(void) {
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) exit(3);
}

/* "race N": N device publishes and samples as fast as possible, every figure of the i-th
 * equal to i, into a 256-record ring, while the reader polls. */
static int race(long n) {
    vsc_options opt;
    vsc_options_init(&opt);
    opt.sample_capacity = 256;
    opt.event_capacity = 8;
    vsc_channel ch;
    expect_ok(vsc_create(&ch, &opt), "create");
    vsc_device dev = {0, 0, {0}, NULL, VSC_ABSENT};
    int slot = expect_ok(vsc_add_device(&ch, &dev), "device");
    printf("ready %s\n", vsc_path(&ch));
    fflush(stdout);
    wait_line();
    for (uint64_t i = 1; i <= (uint64_t)n; i++) {
        vsc_figures f;
        f.read_at_ns = f.allocated = f.allocated_peak = f.reserved = f.reserved_peak = i;
        f.active = f.inactive_split = f.requested = f.alloc_retries = f.ooms = i;
        f.device_allocs = f.device_frees = f.device_free = f.limit = f.interval_peak = f.step_peak = i;
        vsc_publish_device(&ch, slot, &f);
        vsc_sample s = {i, i, i, i, i, i, 0, 0, 0};
        vsc_sample_append(&ch, &s);
    }
    return vsc_finish(&ch, NULL) == VSC_OK ? 0 : 4;
}

int main(int argc, char **argv) {
    const char *ending = argc > 1 ? argv[1] : "clean";
    if (strcmp(ending, "race") == 0) return race(argc > 2 ? atol(argv[2]) : 1000000);
    vsc_options opt;
    vsc_options_init(&opt);
    opt.sample_period_us = 10000;
    opt.flags = VSC_FLAG_PEAK_RESET | VSC_FLAG_MODULE_ATTRIBUTION;
    opt.rank = 2;
    opt.local_rank = 1;
    opt.world_size = 4;
    opt.job_id = "job-rt";
    opt.framework = "roundtrip 1.0";
    opt.cmdline = "roundtrip --case all";
    opt.allocator_config = "expandable_segments:True";
    vsc_channel ch;
    expect_ok(vsc_create(&ch, &opt), "create");

    vsc_device d0 = {3, 1, {0}, "00000000:3B:00.0", 80 * GIB};
    for (int i = 0; i < 16; i++) d0.uuid[i] = (uint8_t)(0xA0 + i);
    vsc_device d1 = {5, 0, {0}, NULL, VSC_ABSENT};
    int s0 = expect_ok(vsc_add_device(&ch, &d0), "device 0");
    int s1 = expect_ok(vsc_add_device(&ch, &d1), "device 1");

    vsc_figures f;
    vsc_figures_init(&f);
    f.read_at_ns = 5000;
    f.allocated = 1001, f.allocated_peak = 1002, f.reserved = 1003, f.reserved_peak = 1004;
    f.active = 1005, f.inactive_split = 1006, f.requested = 1007, f.alloc_retries = 1008;
    f.ooms = 1009, f.device_allocs = 1010, f.device_frees = 1011, f.device_free = 1012;
    f.limit = 1013, f.interval_peak = 1014, f.step_peak = 1015;
    expect_ok(vsc_publish_device(&ch, s0, &f), "publish 0");
    vsc_figures_init(&f);
    f.read_at_ns = 5001;
    f.allocated = 7;
    expect_ok(vsc_publish_device(&ch, s1, &f), "publish 1");

    expect_ok(vsc_phase(&ch, "forward"), "phase");
    expect_ok(vsc_phase(&ch, "backward"), "phase");
    expect_ok(vsc_status(&ch, 42, "forward/model.layers.3"), "status");

    for (uint16_t k = 1; k <= 13; k++) {
        vsc_event e;
        uint16_t kind = k == 13 ? 99 : k;
        char text[32];
        snprintf(text, sizeof text, "event %u", (unsigned)kind);
        vsc_event_init(&e, kind);
        e.t_ns = 100 + k;
        e.slot = (uint16_t)(k % 2);
        e.phase = (uint16_t)(k % 3);
        e.step = k;
        for (int a = 0; a < 6; a++) e.args[a] = (uint64_t)k * 10 + (uint64_t)a;
        e.text = text;
        expect_ok(vsc_event_append(&ch, &e), "event");
    }
    for (uint64_t i = 0; i < 10; i++) {
        vsc_sample s;
        vsc_sample_init(&s);
        s.t_ns = 1000 + i;
        s.slot = (uint8_t)(i % 2);
        s.flags = (uint8_t)(i & 15);
        s.phase = (uint16_t)(i % 3);
        s.allocated = i * 1000 + 1, s.reserved = i * 1000 + 2, s.peak = i * 1000 + 3, s.active = i * 1000 + 4;
        s.step = i;
        expect_ok(vsc_sample_append(&ch, &s), "sample");
    }
    printf("ready %s\n", vsc_path(&ch));
    fflush(stdout);

    wait_line();
    for (uint64_t i = 0; i < 5000; i++) {
        vsc_sample s;
        vsc_sample_init(&s);
        s.t_ns = 20000 + i;
        s.allocated = 100000 + i;
        expect_ok(vsc_sample_append(&ch, &s), "flood sample");
    }
    for (uint64_t i = 0; i < 600; i++) {
        vsc_event e;
        vsc_event_init(&e, VSC_EV_MARK);
        e.t_ns = 30000 + i;
        e.args[0] = i;
        expect_ok(vsc_event_append(&ch, &e), "flood event");
    }
    expect_ok(vsc_heartbeat(&ch), "heartbeat");
    printf("flooded\n");
    fflush(stdout);

    wait_line();
    if (strcmp(ending, "clean") == 0) return vsc_finish(&ch, NULL) == VSC_OK ? 0 : 4;
    if (strcmp(ending, "error") == 0) {
        vsc_finish(&ch, "CUDA out of memory (from C)");
        return 1;
    }
    for (;;) pause();
}
