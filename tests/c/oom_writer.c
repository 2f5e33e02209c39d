/*
 * The C writer's explicit OOM, for tests/channel_roundtrip.rs: publishes a reading, reports
 * two OOMs with vsc_oom between later readings, and ends with an error exit so the file stays
 * for the Rust reader. argv[1] is a private channel directory; prints the channel's path.
 *   slot 0: total 80 GiB; allocated 7 GiB, reserved 9 GiB, 4 retries, 3 GiB free, no OOMs
 *   status step 40, label "train/backward" (a phase): vsc_oom(6 GiB asked, 1 GiB free)
 *   the same reading again (the program counts no OOMs of its own)
 *   status without a step, label "eval" (no phase): vsc_oom(both unknown)
 *   a reading whose own OOMs count is 3
 */
#include "vramscope_channel.h"

#define GIB (UINT64_C(1) << 30)

static void expect(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "failed: %s\n", what);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    vsc_options opt;
    vsc_options_init(&opt);
    opt.dir = argv[1];
    static vsc_channel ch;
    expect(vsc_create(&ch, &opt) == VSC_OK, "create");
    vsc_device dev = {0, 0, {0}, NULL, 80 * GIB};
    int slot = vsc_add_device(&ch, &dev);
    expect(slot == 0, "device");
    vsc_figures f;
    vsc_figures_init(&f);
    f.allocated = 7 * GIB;
    f.reserved = 9 * GIB;
    f.alloc_retries = 4;
    f.device_free = 3 * GIB;
    expect(vsc_publish_device(&ch, slot, &f) == VSC_OK, "publish");
    expect(vsc_phase(&ch, "train/backward") == 1, "phase");
    expect(vsc_status(&ch, 40, "train/backward") == VSC_OK, "status");
    expect(vsc_oom(&ch, slot, 6 * GIB, GIB) == VSC_OK, "first oom");
    expect(vsc_publish_device(&ch, slot, &f) == VSC_OK, "publish again");
    expect(vsc_status(&ch, VSC_ABSENT, "eval") == VSC_OK, "status without a step");
    expect(vsc_oom(&ch, slot, VSC_ABSENT, VSC_ABSENT) == VSC_OK, "second oom");
    f.ooms = 3;
    expect(vsc_publish_device(&ch, slot, &f) == VSC_OK, "publish with a count");
    expect(vsc_oom(&ch, 1, GIB, VSC_ABSENT) == VSC_E_ARG, "no such slot");
    expect(vsc_oom(&ch, -1, GIB, VSC_ABSENT) == VSC_E_ARG, "negative slot");
    expect(vsc_oom(NULL, 0, GIB, VSC_ABSENT) == VSC_E_CLOSED, "no channel");
    printf("%s\n", vsc_path(&ch));
    expect(vsc_finish(&ch, "done") == VSC_OK, "finish");
    expect(vsc_oom(&ch, slot, GIB, VSC_ABSENT) == VSC_E_CLOSED, "after the end");
    return 0;
}
