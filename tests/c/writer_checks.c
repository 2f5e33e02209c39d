/*
 * Checks of the C writer's contract that need no reader: error codes instead of aborts, one
 * warning line at most, no leftovers after a failure, capacities, interning, text cut on a
 * character boundary, and fork. Run by tests/channel_roundtrip.rs with a private directory
 * in argv[1]; exits 0 and prints "all checks passed" when every check holds.
 */
#include "vramscope_channel.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>

static int failures = 0;

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "check failed, line %d: %s\n", __LINE__, #cond); \
            failures++;                                                   \
        }                                                                 \
    } while (0)

static int count_entries(const char *dir) {
    int n = 0;
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static uint64_t read_u64(const char *path, long off) {
    uint8_t b[8] = {0};
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    if (fseek(f, off, SEEK_SET) != 0 || fread(b, 1, 8, f) != 8) b[0] = 0;
    fclose(f);
    return vsc__get64(b);
}

static int lock_held(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

static void failures_to_create(const char *base) {
    vsc_channel ch;
    vsc_options opt;
    char path[512];

    CHECK(vsc_create(NULL, NULL) == VSC_E_ARG);
    vsc_options_init(&opt);
    opt.sample_capacity = 3;
    CHECK(vsc_create(&ch, &opt) == VSC_E_ARG);
    opt.sample_capacity = 0;
    opt.device_capacity = 65;
    CHECK(vsc_create(&ch, &opt) == VSC_E_ARG);

    /* Quiet first: no line, and the one allowed warning is still unused. */
    vsc_options_init(&opt);
    opt.dir = "/proc/vramscope-cannot-exist";
    opt.quiet = 1;
    CHECK(vsc_create(&ch, &opt) == VSC_E_DIR);
    opt.quiet = 0;
    CHECK(vsc_create(&ch, &opt) == VSC_E_DIR); /* the one warning line of this process */
    CHECK(vsc_sample_append(&ch, &(vsc_sample){0}) == VSC_E_CLOSED);
    CHECK(vsc_finish(&ch, NULL) == VSC_E_CLOSED);

    snprintf(path, sizeof path, "%s/open", base);
    CHECK(mkdir(path, 0755) == 0);
    CHECK(chmod(path, 0755) == 0);
    opt.dir = path;
    CHECK(vsc_create(&ch, &opt) == VSC_E_DIR);
    CHECK(count_entries(path) == 0);

    char real[512];
    snprintf(real, sizeof real, "%s/real", base);
    snprintf(path, sizeof path, "%s/link", base);
    CHECK(mkdir(real, 0700) == 0);
    CHECK(symlink(real, path) == 0);
    opt.dir = path;
    CHECK(vsc_create(&ch, &opt) == VSC_E_DIR);
    CHECK(count_entries(real) == 0);

    /* A file size limit fails creation as a full /dev/shm would, and without SIGXFSZ
     * (whose default action would kill this program). */
    snprintf(path, sizeof path, "%s/full", base);
    CHECK(mkdir(path, 0700) == 0);
    struct rlimit saved, small = {65536, 65536};
    getrlimit(RLIMIT_FSIZE, &saved);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    opt.dir = path;
    CHECK(vsc_create(&ch, &opt) == VSC_E_NOSPACE);
    setrlimit(RLIMIT_FSIZE, &saved);
    CHECK(count_entries(path) == 0);
}

static void contract(const char *base) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/ok", base);
    CHECK(mkdir(dir, 0700) == 0);
    vsc_options opt;
    vsc_options_init(&opt);
    opt.dir = dir;
    opt.device_capacity = 2;
    opt.string_capacity = 2;
    opt.sample_capacity = 8;
    opt.event_capacity = 4;
    vsc_channel ch;
    CHECK(vsc_create(&ch, &opt) == VSC_OK);
    const char *path = vsc_path(&ch);
    CHECK(read_u64(path, 0x018) == 0x3000);
    CHECK(read_u64(path, 0x020) == VSC_STATE_RUNNING);
    CHECK(lock_held(path) == 1);

    vsc_device dev = {0, 0, {0}, NULL, VSC_ABSENT};
    CHECK(vsc_add_device(&ch, &dev) == 0);
    CHECK(vsc_add_device(&ch, &dev) == 1);
    CHECK(vsc_add_device(&ch, &dev) == VSC_E_FULL);
    vsc_figures f;
    vsc_figures_init(&f);
    CHECK(vsc_publish_device(&ch, 2, &f) == VSC_E_ARG);
    CHECK(vsc_publish_device(&ch, -1, &f) == VSC_E_ARG);
    CHECK(vsc_publish_device(&ch, 1, NULL) == VSC_E_ARG);
    CHECK(vsc_sample_append(&ch, NULL) == VSC_E_ARG);
    CHECK(vsc_event_append(&ch, NULL) == VSC_E_ARG);

    char long_name[100];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    CHECK(vsc_phase(&ch, "forward") == 1);
    CHECK(vsc_phase(&ch, "forward") == 1);
    CHECK(vsc_phase(&ch, "") == 0);
    CHECK(vsc_phase(&ch, long_name) == 2);
    CHECK(vsc_phase(&ch, "one too many") == 0);
    CHECK(read_u64(path, 0x218) == 2);

    /* 80 two-byte characters are 160 bytes; 81 must be cut back to 80, not to 160.5. */
    char label[200];
    size_t n = 0;
    for (int i = 0; i < 81; i++) {
        label[n++] = (char)0xC3;
        label[n++] = (char)0xA9;
    }
    label[n] = '\0';
    CHECK(vsc_status(&ch, 5, label) == VSC_OK);
    CHECK(read_u64(path, 0x258) == 160);
    label[1] = 'a'; /* now 1 + 1 + 80*2 = 162 bytes, cut at 159 before a split character */
    label[0] = 'a';
    CHECK(vsc_status(&ch, 6, label) == VSC_OK);
    CHECK(read_u64(path, 0x258) == 160);
    CHECK(read_u64(path, 0x240) == 4);
    /* The spare (spec section 3) names the block and the odd seq of its last update, and holds
     * the block as it was before that update: step 5. */
    CHECK(read_u64(path, 0x300) == 3);
    CHECK(read_u64(path, 0x308) == 0x240);
    CHECK(read_u64(path, 0x310) == 5);
    CHECK(read_u64(path, 0x248) == 6);
    f.allocated = 7;
    CHECK(vsc_publish_device(&ch, 1, &f) == VSC_OK);
    f.allocated = 8;
    CHECK(vsc_publish_device(&ch, 1, &f) == VSC_OK);
    CHECK(read_u64(path, 0x300) == 3);
    CHECK(read_u64(path, 0x308) == 0x500);
    CHECK(read_u64(path, 0x310 + 0x38) == 7);
    CHECK(read_u64(path, 0x540) == 8);

    /* fork: the child publishes nothing and does not hold the lock. */
    uint64_t head_before = read_u64(path, 0x208);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0;
        vsc_sample s;
        vsc_sample_init(&s);
        if (vsc_sample_append(&ch, &s) != VSC_E_CLOSED) bad |= 1;
        if (vsc_finish(&ch, NULL) != VSC_E_CLOSED) bad |= 2;
        char link[300], target[600];
        DIR *d = opendir("/proc/self/fd");
        for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
            snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
            ssize_t len = readlink(link, target, sizeof target - 1);
            if (len > 0) {
                target[len] = '\0';
                if (strcmp(target, path) == 0) bad |= 4;
            }
        }
        if (d) closedir(d);
        _exit(bad);
    }
    int status = -1;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(read_u64(path, 0x208) == head_before);
    CHECK(lock_held(path) == 1);
    vsc_sample s;
    vsc_sample_init(&s);
    CHECK(vsc_sample_append(&ch, &s) == VSC_OK);

    char copy[sizeof ch.path];
    snprintf(copy, sizeof copy, "%s", path);
    CHECK(vsc_finish(&ch, NULL) == VSC_OK);
    CHECK(access(copy, F_OK) != 0);
    CHECK(vsc_finish(&ch, NULL) == VSC_E_CLOSED);
    CHECK(vsc_heartbeat(&ch) == VSC_E_CLOSED);
    CHECK(count_entries(dir) == 0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: writer_checks PRIVATE_DIR\n");
        return 2;
    }
    failures_to_create(argv[1]);
    contract(argv[1]);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
