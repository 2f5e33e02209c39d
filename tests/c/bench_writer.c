/*
 * Cost of the C writer's hot calls, in ns per call: build with
 *   cc -std=c99 -O2 -Wall -Wextra -Werror -Iassets tests/c/bench_writer.c -o bench_writer
 * and run `./bench_writer [DIR]` (DIR: a private directory; default: the spec's choice).
 */
#include "vramscope_channel.h"

static double per_call_ns(uint64_t start, uint64_t end, long n) { return (double)(end - start) / (double)n; }

int main(int argc, char **argv) {
    const long n = 5000000;
    vsc_options opt;
    vsc_options_init(&opt);
    if (argc > 1) opt.dir = argv[1];
    vsc_channel ch;
    if (vsc_create(&ch, &opt) != VSC_OK) return 1;
    vsc_device dev = {0, 0, {0}, NULL, VSC_ABSENT};
    int slot = vsc_add_device(&ch, &dev);

    vsc_sample s;
    vsc_sample_init(&s);
    s.t_ns = 1;
    uint64_t t0 = vsc_now_ns();
    for (long i = 0; i < n; i++) {
        s.allocated = (uint64_t)i;
        vsc_sample_append(&ch, &s);
    }
    uint64_t t1 = vsc_now_ns();
    printf("sample (caller's timestamp)      %6.1f ns\n", per_call_ns(t0, t1, n));

    s.t_ns = 0;
    t0 = vsc_now_ns();
    for (long i = 0; i < n; i++) {
        s.allocated = (uint64_t)i;
        vsc_sample_append(&ch, &s);
    }
    t1 = vsc_now_ns();
    printf("sample (clock read + heartbeat)  %6.1f ns\n", per_call_ns(t0, t1, n));

    vsc_figures f;
    vsc_figures_init(&f);
    f.read_at_ns = 1;
    t0 = vsc_now_ns();
    for (long i = 0; i < n; i++) {
        f.allocated = (uint64_t)i;
        vsc_publish_device(&ch, slot, &f);
    }
    t1 = vsc_now_ns();
    printf("device slot publish (seqlock)    %6.1f ns\n", per_call_ns(t0, t1, n));

    vsc_event e;
    vsc_event_init(&e, VSC_EV_MARK);
    e.t_ns = 1;
    e.text = "forward/model.encoder.layers.3";
    t0 = vsc_now_ns();
    for (long i = 0; i < n / 5; i++) {
        e.args[0] = (uint64_t)i;
        vsc_event_append(&ch, &e);
    }
    t1 = vsc_now_ns();
    printf("event with a 30-byte text        %6.1f ns\n", per_call_ns(t0, t1, n / 5));
    vsc_finish(&ch, NULL);
    return 0;
}
