/*
 * vramscope_channel.h: a C writer for the vramscope channel (docs/channel-v1.md), one header,
 * C99 + POSIX (Linux), no dependencies.
 *
 * A program publishes its GPU memory figures in a shared-memory file that the vramscope
 * monitor reads. Include this header FIRST in its translation unit (it needs _DEFAULT_SOURCE
 * for flock), or compile with -D_DEFAULT_SOURCE / -D_GNU_SOURCE.
 *
 *     vsc_channel ch;
 *     vsc_options opt;
 *     vsc_options_init(&opt);                    (ranks and job id from the environment)
 *     if (vsc_create(&ch, &opt) == VSC_OK) {     (a failure warned once on stderr)
 *         vsc_device dev = {0};                  (ordinal 0, no UUID, no PCI id)
 *         dev.total = VSC_ABSENT;
 *         int slot = vsc_add_device(&ch, &dev);
 *         vsc_figures f;
 *         vsc_figures_init(&f);                  (every figure VSC_ABSENT)
 *         f.allocated = 123;
 *         vsc_publish_device(&ch, slot, &f);
 *         vsc_sample s;
 *         vsc_sample_init(&s);                   (samples: vsc_sample_append; events:
 *         s.slot = (uint8_t)slot;                 vsc_event_init + vsc_event_append;
 *         s.allocated = 123;                      phases: vsc_phase; vsc_status; vsc_heartbeat)
 *         vsc_sample_append(&ch, &s);
 *         vsc_oom(&ch, slot, requested, VSC_ABSENT); (an allocation failed: OOM event, count)
 *         vsc_finish(&ch, NULL);                 (clean: the file is removed)
 *     }
 *
 * A vsc_channel is about 13 KiB (CRC tables, path): keep it static or on the heap.
 * Every function returns VSC_OK (0) or a negative VSC_E_* code and never aborts, exits or
 * raises a signal. Calls on one channel must not run concurrently (one writer, as the
 * protocol requires): serialise them yourself. A forked child stops publishing on its own
 * (its calls return VSC_E_CLOSED); call vsc_finish before exit, or the monitor sees a crash.
 */
#ifndef VRAMSCOPE_CHANNEL_H
#define VRAMSCOPE_CHANNEL_H

#if !defined(_DEFAULT_SOURCE) && !defined(_GNU_SOURCE)
#define _DEFAULT_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define VSC_ABSENT UINT64_C(0xFFFFFFFFFFFFFFFF)
#define VSC_NO_SLOT 0xFFFFu
/* In vsc_options: read RANK / LOCAL_RANK / WORLD_SIZE from the environment. */
#define VSC_RANK_FROM_ENV INT32_MIN

enum {
    VSC_OK = 0,
    VSC_E_DIR = -1,     /* no usable channel directory (missing, not ours, open to others) */
    VSC_E_CREATE = -2,  /* the file could not be created */
    VSC_E_NOSPACE = -3, /* no room for the file (a full /dev/shm) */
    VSC_E_LOCK = -4,    /* the lock could not be taken */
    VSC_E_MAP = -5,     /* the file could not be mapped */
    VSC_E_ARG = -6,     /* a bad argument: capacity, slot, NULL pointer */
    VSC_E_FULL = -7,    /* every device slot is taken */
    VSC_E_CLOSED = -8   /* not publishing: never created, finished, or in a forked child */
};

enum { VSC_STATE_STARTING = 0, VSC_STATE_RUNNING = 1, VSC_STATE_EXITED_CLEAN = 2, VSC_STATE_EXITED_ERROR = 3 };

enum {
    VSC_KIND_PYTORCH = 1,
    VSC_KIND_JAX = 2,
    VSC_KIND_TENSORFLOW = 3,
    VSC_KIND_CUPY = 4,
    VSC_KIND_PYTHON = 5,
    VSC_KIND_C = 16,
    VSC_KIND_RUST = 17
};

/* VSC_FLAG_SITES: the writer records allocation history and answers snapshot requests (the
   C writer does neither and never sets it; a reader raises the count at 0x220 to ask). */
enum { VSC_FLAG_PEAK_RESET = 1u << 0, VSC_FLAG_MODULE_ATTRIBUTION = 1u << 1, VSC_FLAG_SITES = 1u << 2 };

enum {
    VSC_SAMPLE_PEAK_EXACT = 1u << 0,
    VSC_SAMPLE_NEW_HIGH_WATER = 1u << 1,
    VSC_SAMPLE_FOREIGN_RESET_SEEN = 1u << 2,
    VSC_SAMPLE_HOOK = 1u << 3,
    /* The step counts the steps since an attach (a writer started inside a running job that
       could not read the job's own count), not the job's. */
    VSC_SAMPLE_STEP_SINCE_ATTACH = 1u << 4
};

enum {
    VSC_EV_OOM = 1,
    VSC_EV_OOM_ERROR = 2,
    VSC_EV_PHASE_BEGIN = 3,
    VSC_EV_PHASE_END = 4,
    VSC_EV_STEP_END = 5,
    VSC_EV_MARK = 6,
    VSC_EV_NEW_HIGH_WATER = 7,
    VSC_EV_ALLOC_RETRY = 8,
    VSC_EV_EXIT = 9,
    VSC_EV_SNAPSHOT_WRITTEN = 10,
    VSC_EV_FOREIGN_PEAK_RESET = 11,
    VSC_EV_EMPTY_CACHE = 12
};

/* Capacities of the spec's default 392 KiB file. */
enum { VSC_DEFAULT_DEVICES = 16, VSC_DEFAULT_STRINGS = 32, VSC_DEFAULT_SAMPLES = 4096, VSC_DEFAULT_EVENTS = 512 };

/* Everything fixed at creation. vsc_options_init fills the defaults. */
typedef struct vsc_options {
    uint32_t kind;             /* VSC_KIND_C by default */
    uint32_t sample_period_us; /* 0: on demand only */
    uint32_t flags;            /* VSC_FLAG_* */
    int32_t rank, local_rank, world_size; /* -1: not distributed; VSC_RANK_FROM_ENV */
    const char *job_id;        /* NULL: TORCHELASTIC_RUN_ID, else SLURM_JOB_ID */
    const char *framework;     /* e.g. "mylib 1.2"; NULL: empty */
    const char *cmdline;       /* NULL: /proc/self/cmdline, arguments joined by spaces */
    const char *allocator_config;
    const char *dir;           /* NULL: $VRAMSCOPE_DIR, /dev/shm/vramscope-<uid>, $XDG_RUNTIME_DIR/vramscope */
    uint32_t device_capacity, string_capacity, sample_capacity, event_capacity; /* 0: default */
    int quiet;                 /* nonzero: no warning on stderr when creation fails */
} vsc_options;

/* One GPU: the monitor joins it to NVML by UUID, else PCI bus id. */
typedef struct vsc_device {
    uint32_t ordinal;          /* the framework's device number */
    int has_uuid;
    uint8_t uuid[16];          /* raw bytes of the CUDA/NVML UUID */
    const char *pci_bus_id;    /* "00000000:18:00.0"; NULL when unknown */
    uint64_t total;            /* bytes, or VSC_ABSENT */
} vsc_device;

/* The [M] figures of a device slot, in file order. */
typedef struct vsc_figures {
    uint64_t read_at_ns;       /* 0: now */
    uint64_t allocated, allocated_peak, reserved, reserved_peak, active, inactive_split, requested;
    uint64_t alloc_retries, ooms, device_allocs, device_frees, device_free, limit;
    uint64_t interval_peak, step_peak;
} vsc_figures;

typedef struct vsc_sample {
    uint64_t t_ns;             /* 0: now, which also beats the heartbeat */
    uint64_t allocated, reserved, peak, active, step;
    uint8_t slot, flags;       /* VSC_SAMPLE_* */
    uint16_t phase;            /* from vsc_phase; 0: none */
} vsc_sample;

typedef struct vsc_event {
    uint64_t t_ns;             /* 0: now */
    uint16_t kind, slot, phase; /* slot VSC_NO_SLOT: none */
    uint64_t step;
    uint64_t args[6];
    const char *text;          /* NULL: none; cut to 172 bytes */
} vsc_event;

typedef struct vsc_channel {
    uint8_t *map;
    size_t size;
    int fd, dir_fd, live;
    unsigned generation;
    dev_t dev;
    ino_t ino;
    char name[64];
    uint64_t off[4];
    uint32_t cap[4];
    uint32_t devices, strings;
    uint64_t samples, events, status_seq;
    uint64_t device_seq[64];
    uint32_t crc_table[8][256];
    char path[4096];
    struct vsc_channel *next_live;
} vsc_channel;

/* ------------------------------------------------------------------------------------------ */
/* Internals                                                                                  */

enum { VSC__HEADER = 512, VSC__DEVICE = 256, VSC__STRING = 64, VSC__SAMPLE = 64, VSC__EVENT = 256 };
enum { VSC__SEC_DEVICES = 0, VSC__SEC_STRINGS = 1, VSC__SEC_SAMPLES = 2, VSC__SEC_EVENTS = 3 };
#define VSC__PAGE 4096u

/* Channels of this translation unit, for the fork handler. */
static vsc_channel *vsc__live_head = NULL;
static unsigned vsc__generation = 0;
static int vsc__atfork_done = 0;
static int vsc__warned = 0;

static inline void vsc__store(vsc_channel *ch, size_t off, uint64_t v) {
    __atomic_store_n((uint64_t *)(void *)(ch->map + off), v, __ATOMIC_RELAXED);
}

static inline void vsc__store_release(vsc_channel *ch, size_t off, uint64_t v) {
    __atomic_store_n((uint64_t *)(void *)(ch->map + off), v, __ATOMIC_RELEASE);
}

/* Opens a seqlocked or ring write: the odd seq must be visible before any field changes. */
static inline void vsc__begin(vsc_channel *ch, size_t off, uint64_t odd) {
    vsc__store(ch, off, odd);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Before a seqlocked update of the block at `off` turns its seq `odd`, keeps the `len` bytes
 * after the seq, as they stand, in the spare at 0x300 (spec section 3): a writer killed inside
 * the update leaves its last complete values readable there. */
static inline void vsc__spare(vsc_channel *ch, size_t off, size_t len, uint64_t odd) {
    vsc__store(ch, 0x308, off);
    for (size_t i = 0; i < len; i += 8) {
        const uint64_t *from = (const uint64_t *)(const void *)(ch->map + off + 8 + i);
        vsc__store(ch, 0x310 + i, __atomic_load_n(from, __ATOMIC_RELAXED));
    }
    /* The copy before the seq that names it, and that before the block's odd seq. */
    vsc__store_release(ch, 0x300, odd);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline uint64_t vsc__clock_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static inline uint64_t vsc_now_ns(void) { return vsc__clock_ns(CLOCK_MONOTONIC); }

/* Tables for CRC-32 by eight bytes at a time ("slicing-by-8"): a byte at a time is a chain
 * of dependent lookups and made up most of a sample's cost. */
static inline void vsc__crc_init(uint32_t t[8][256]) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
}

static inline uint32_t vsc__le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* CRC-32 (IEEE), as zlib's crc32. */
static inline uint32_t vsc__crc32(const uint32_t t[8][256], const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t a = c ^ vsc__le32(p), b = vsc__le32(p + 4);
        c = t[7][a & 0xFFu] ^ t[6][(a >> 8) & 0xFFu] ^ t[5][(a >> 16) & 0xFFu] ^ t[4][a >> 24] ^
            t[3][b & 0xFFu] ^ t[2][(b >> 8) & 0xFFu] ^ t[1][(b >> 16) & 0xFFu] ^ t[0][b >> 24];
    }
    while (n--) c = t[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static inline void vsc__put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void vsc__put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void vsc__put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline uint64_t vsc__get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Length of `s` cut to at most `max` bytes without splitting a UTF-8 character. */
static inline size_t vsc__fit(const char *s, size_t max) {
    if (s == NULL) return 0;
    size_t n = strnlen(s, max + 1);
    if (n <= max) return n;
    n = max;
    while (n > 0 && (((unsigned char)s[n]) & 0xC0u) == 0x80u) n--;
    return n;
}

static inline void vsc__text(uint8_t *dst, size_t size, const char *s) {
    size_t n = vsc__fit(s, size);
    if (n) memcpy(dst, s, n);
}

static inline void vsc__warn(const vsc_options *opt, const char *what, const char *where, int err) {
    if (vsc__warned || (opt && opt->quiet)) return;
    vsc__warned = 1;
    fprintf(stderr, "vramscope: not publishing memory figures: %s %s: %s\n", what, where, strerror(err));
}

/* A forked child shares the parent's open file and so its lock: let go of it at once, or a
 * dead parent would still look alive. Only close() here, which is async-signal-safe as a
 * child handler of a multithreaded parent requires; the mapping stays, unused, until the
 * child exits or execs. */
static void vsc__in_child(void) {
    vsc__generation++;
    for (vsc_channel *ch = vsc__live_head; ch != NULL; ch = ch->next_live) {
        close(ch->fd);
        close(ch->dir_fd);
        ch->fd = ch->dir_fd = -1;
        ch->live = 0;
    }
    vsc__live_head = NULL;
}

static inline int vsc__usable(const vsc_channel *ch) {
    return ch != NULL && ch->live && ch->generation == vsc__generation && ch->map != NULL;
}

static inline void vsc__unregister(vsc_channel *ch) {
    for (vsc_channel **p = &vsc__live_head; *p != NULL; p = &(*p)->next_live) {
        if (*p == ch) {
            *p = ch->next_live;
            break;
        }
    }
    ch->next_live = NULL;
}

static inline int32_t vsc__env_int(const char *name) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return -1;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end != '\0' || n < INT32_MIN + 1 || n > INT32_MAX) return -1;
    return (int32_t)n;
}

/* Field 22 of /proc/self/stat, counted after the last ')' (the command may hold spaces). */
static inline uint64_t vsc__starttime(void) {
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL) return 0;
    p++;
    for (int field = 2; field < 22; field++) {
        while (*p == ' ') p++;
        if (field == 21) break;
        while (*p && *p != ' ') p++;
    }
    return strtoull(p, NULL, 10);
}

static inline void vsc__cmdline(char *out, size_t size) {
    out[0] = '\0';
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, out, size - 1);
    close(fd);
    if (n <= 0) return;
    while (n > 0 && out[n - 1] == '\0') n--;
    for (ssize_t i = 0; i < n; i++)
        if (out[i] == '\0') out[i] = ' ';
    out[n] = '\0';
}

static inline int vsc__pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

static inline uint64_t vsc__align(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/* The directory per the spec, created 0700, vetted through its descriptor. */
static inline int vsc__open_dir(const vsc_options *opt, char *path, size_t size) {
    const char *env = getenv("VRAMSCOPE_DIR");
    struct stat st;
    if (opt->dir && *opt->dir) {
        snprintf(path, size, "%s", opt->dir);
    } else if (env && *env) {
        snprintf(path, size, "%s", env);
    } else if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(path, size, "/dev/shm/vramscope-%lu", (unsigned long)geteuid());
    } else if ((env = getenv("XDG_RUNTIME_DIR")) && *env) {
        snprintf(path, size, "%s/vramscope", env);
    } else {
        vsc__warn(opt, "no channel directory", "(/dev/shm, XDG_RUNTIME_DIR)", ENOENT);
        return VSC_E_DIR;
    }
    int created = mkdir(path, 0700) == 0;
    if (!created && errno != EEXIST) {
        vsc__warn(opt, "cannot create", path, errno);
        return VSC_E_DIR;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        vsc__warn(opt, "cannot open", path, errno);
        return VSC_E_DIR;
    }
    if (created) fchmod(fd, 0700);
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        vsc__warn(opt, "refusing a directory not ours alone (mode 0700, our uid)", path, EPERM);
        close(fd);
        return VSC_E_DIR;
    }
    return fd;
}

/* Header, section table and blank figures; everything but the magic. */
static inline void vsc__write_header(vsc_channel *ch, const vsc_options *opt) {
    uint8_t *h = ch->map;
    char text[129];
    struct stat st;
    vsc__put32(h + 0x008, 0x01020304u);
    vsc__put16(h + 0x00C, 1);
    vsc__put16(h + 0x00E, 0);
    vsc__put32(h + 0x010, VSC__HEADER);
    vsc__put32(h + 0x014, opt->flags);
    vsc__put64(h + 0x018, ch->size);
    vsc__put64(h + 0x020, VSC_STATE_STARTING);
    uint64_t mono = vsc_now_ns();
    vsc__put64(h + 0x028, mono);
    vsc__put64(h + 0x030, (uint64_t)getpid());
    vsc__put64(h + 0x038, vsc__starttime());
    vsc__put64(h + 0x040, stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : VSC_ABSENT);
    vsc__put64(h + 0x048, (uint64_t)geteuid());
    vsc__put64(h + 0x050, vsc__clock_ns(CLOCK_REALTIME));
    vsc__put64(h + 0x058, mono);
    vsc__put32(h + 0x060, opt->kind ? opt->kind : VSC_KIND_C);
    vsc__put32(h + 0x064, opt->sample_period_us);
    int32_t ranks[3] = {opt->rank, opt->local_rank, opt->world_size};
    const char *rank_env[3] = {"RANK", "LOCAL_RANK", "WORLD_SIZE"};
    for (int i = 0; i < 3; i++) {
        int32_t r = ranks[i] == VSC_RANK_FROM_ENV ? vsc__env_int(rank_env[i]) : ranks[i];
        vsc__put32(h + 0x068 + 4 * i, (uint32_t)r);
    }
    const char *job = opt->job_id;
    if (job == NULL) {
        job = getenv("TORCHELASTIC_RUN_ID");
        if (job == NULL || *job == '\0' || strcmp(job, "none") == 0) job = getenv("SLURM_JOB_ID");
    }
    vsc__text(h + 0x080, 64, job);
    vsc__text(h + 0x0C0, 64, opt->framework);
    if (opt->cmdline) {
        vsc__text(h + 0x100, 128, opt->cmdline);
    } else {
        vsc__cmdline(text, sizeof text);
        vsc__text(h + 0x100, 128, text);
    }
    vsc__text(h + 0x180, 64, opt->allocator_config);
    static const uint32_t sizes[4] = {VSC__DEVICE, VSC__STRING, VSC__SAMPLE, VSC__EVENT};
    for (int i = 0; i < 4; i++) {
        vsc__put64(h + 0x1C0 + 16 * i, ch->off[i]);
        vsc__put32(h + 0x1C8 + 16 * i, sizes[i]);
        vsc__put32(h + 0x1CC + 16 * i, ch->cap[i]);
    }
    vsc__put64(h + 0x248, VSC_ABSENT); /* status step: none yet */
    for (uint32_t d = 0; d < ch->cap[VSC__SEC_DEVICES]; d++)
        for (size_t f = 0x38; f < 0xB8; f += 8) vsc__put64(h + ch->off[VSC__SEC_DEVICES] + d * VSC__DEVICE + f, VSC_ABSENT);
}

/* ------------------------------------------------------------------------------------------ */
/* API                                                                                        */

static inline void vsc_options_init(vsc_options *o) {
    memset(o, 0, sizeof *o);
    o->kind = VSC_KIND_C;
    o->rank = o->local_rank = o->world_size = VSC_RANK_FROM_ENV;
}

static inline void vsc_figures_init(vsc_figures *f) {
    f->read_at_ns = 0;
    f->allocated = f->allocated_peak = f->reserved = f->reserved_peak = VSC_ABSENT;
    f->active = f->inactive_split = f->requested = f->alloc_retries = f->ooms = VSC_ABSENT;
    f->device_allocs = f->device_frees = f->device_free = f->limit = VSC_ABSENT;
    f->interval_peak = f->step_peak = VSC_ABSENT;
}

static inline void vsc_sample_init(vsc_sample *s) {
    memset(s, 0, sizeof *s);
    s->allocated = s->reserved = s->peak = s->active = s->step = VSC_ABSENT;
}

static inline void vsc_event_init(vsc_event *e, uint16_t kind) {
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->slot = VSC_NO_SLOT;
    e->step = VSC_ABSENT;
    for (int i = 0; i < 6; i++) e->args[i] = VSC_ABSENT;
}

static inline const char *vsc_strerror(int code) {
    switch (code) {
    case VSC_OK: return "ok";
    case VSC_E_DIR: return "no usable channel directory";
    case VSC_E_CREATE: return "cannot create the channel file";
    case VSC_E_NOSPACE: return "no space for the channel file";
    case VSC_E_LOCK: return "cannot lock the channel file";
    case VSC_E_MAP: return "cannot map the channel file";
    case VSC_E_ARG: return "bad argument";
    case VSC_E_FULL: return "no free device slot";
    case VSC_E_CLOSED: return "channel not open in this process";
    default: return "unknown error";
    }
}

/* Creates `<pid>-<starttime>.vsc` (spec section 1) and sets it RUNNING. */
static inline int vsc_create(vsc_channel *ch, const vsc_options *opt) {
    vsc_options defaults;
    if (ch == NULL) return VSC_E_ARG;
    memset(ch, 0, sizeof *ch);
    ch->fd = ch->dir_fd = -1;
    if (opt == NULL) {
        vsc_options_init(&defaults);
        opt = &defaults;
    }
    uint32_t dc = opt->device_capacity ? opt->device_capacity : VSC_DEFAULT_DEVICES;
    uint32_t sc = opt->string_capacity ? opt->string_capacity : VSC_DEFAULT_STRINGS;
    uint32_t rc = opt->sample_capacity ? opt->sample_capacity : VSC_DEFAULT_SAMPLES;
    uint32_t ec = opt->event_capacity ? opt->event_capacity : VSC_DEFAULT_EVENTS;
    if (dc > 64 || sc > 1024 || !vsc__pow2(rc) || !vsc__pow2(ec) || rc > (1u << 20) || ec > (1u << 20))
        return VSC_E_ARG;
    ch->cap[0] = dc;
    ch->cap[1] = sc;
    ch->cap[2] = rc;
    ch->cap[3] = ec;
    ch->off[0] = 0x400;
    ch->off[1] = ch->off[0] + (uint64_t)dc * VSC__DEVICE;
    ch->off[2] = vsc__align(ch->off[1] + (uint64_t)sc * VSC__STRING, VSC__PAGE);
    ch->off[3] = vsc__align(ch->off[2] + (uint64_t)rc * VSC__SAMPLE, VSC__PAGE);
    ch->size = (size_t)vsc__align(ch->off[3] + (uint64_t)ec * VSC__EVENT, VSC__PAGE);
    vsc__crc_init(ch->crc_table);

    char dir[sizeof ch->path - 64];
    int dfd = vsc__open_dir(opt, dir, sizeof dir);
    if (dfd < 0) return dfd;
    unsigned long long start = (unsigned long long)vsc__starttime();
    char tmp[64];
    snprintf(ch->name, sizeof ch->name, "%ld-%llu.vsc", (long)getpid(), start);
    snprintf(tmp, sizeof tmp, ".%ld-%llu.tmp", (long)getpid(), start);
    snprintf(ch->path, sizeof ch->path, "%s/%s", dir, ch->name);

    int code = VSC_E_CREATE, err = 0;
    const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dfd, tmp, flags, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* Same pid and start time: an earlier channel of this very process. */
        unlinkat(dfd, tmp, 0);
        fd = openat(dfd, tmp, flags, 0600);
    }
    if (fd < 0) {
        err = errno;
        vsc__warn(opt, "cannot create the channel file in", dir, err);
        close(dfd);
        return VSC_E_CREATE;
    }
    /* Reserve every page now: a full /dev/shm fails here, not as SIGBUS later. A file size
     * limit would fail it too, but with SIGXFSZ, which kills by default: check it first. */
    struct rlimit limit;
    if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < ch->size)
        err = EFBIG;
    else
        err = posix_fallocate(fd, 0, (off_t)ch->size);
    if (err != 0) {
        code = (err == ENOSPC || err == EFBIG || err == EDQUOT) ? VSC_E_NOSPACE : VSC_E_CREATE;
        vsc__warn(opt, "no space for the channel file in", dir, err);
        goto fail;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        err = errno;
        code = VSC_E_LOCK;
        vsc__warn(opt, "cannot lock the channel file in", dir, err);
        goto fail;
    }
    void *map = mmap(NULL, ch->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        err = errno;
        code = VSC_E_MAP;
        vsc__warn(opt, "cannot map the channel file in", dir, err);
        goto fail;
    }
    ch->map = (uint8_t *)map;
    ch->fd = fd;
    ch->dir_fd = dfd;
    vsc__write_header(ch, opt);
    /* Magic last: a reader that sees it sees everything above. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(ch->map, "VRAMSCOP", 8);
    struct stat st;
    if (fstat(fd, &st) != 0 || renameat(dfd, tmp, dfd, ch->name) != 0) {
        err = errno;
        vsc__warn(opt, "cannot publish the channel file in", dir, err);
        munmap(ch->map, ch->size);
        ch->map = NULL;
        goto fail;
    }
    ch->dev = st.st_dev;
    ch->ino = st.st_ino;
    vsc__store_release(ch, 0x020, VSC_STATE_RUNNING);
    if (!vsc__atfork_done) {
        vsc__atfork_done = 1;
        pthread_atfork(NULL, NULL, vsc__in_child);
    }
    ch->generation = vsc__generation;
    ch->live = 1;
    ch->next_live = vsc__live_head;
    vsc__live_head = ch;
    return VSC_OK;
fail:
    close(fd);
    unlinkat(dfd, tmp, 0);
    close(dfd);
    ch->fd = ch->dir_fd = -1;
    return code;
}

/* The path of the channel file. */
static inline const char *vsc_path(const vsc_channel *ch) { return ch ? ch->path : ""; }

/* Adds a device slot (identity first, then the count that makes it valid); returns the slot. */
static inline int vsc_add_device(vsc_channel *ch, const vsc_device *dev) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    if (dev == NULL) return VSC_E_ARG;
    if (ch->devices >= ch->cap[VSC__SEC_DEVICES]) return VSC_E_FULL;
    uint32_t slot = ch->devices;
    uint8_t *base = ch->map + ch->off[VSC__SEC_DEVICES] + (size_t)slot * VSC__DEVICE;
    uint32_t flags = 0;
    vsc__put32(base + 0x08, dev->ordinal);
    if (dev->has_uuid) {
        memcpy(base + 0x10, dev->uuid, 16);
        flags |= 1u;
    }
    if (dev->pci_bus_id && *dev->pci_bus_id) {
        vsc__text(base + 0x20, 16, dev->pci_bus_id);
        flags |= 2u;
    }
    vsc__put32(base + 0x0C, flags);
    vsc__put64(base + 0x30, dev->total);
    ch->devices = slot + 1;
    vsc__store_release(ch, 0x200, slot + 1);
    return (int)slot;
}

/* Seqlocked update of a slot's figures (spec section 3). The OOMs figure is the program's own
 * f->ooms: the OOMs reported through vsc_oom are events, which the monitor counts. */
static inline int vsc_publish_device(vsc_channel *ch, int slot, const vsc_figures *f) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    if (f == NULL || slot < 0 || (uint32_t)slot >= ch->devices) return VSC_E_ARG;
    size_t base = ch->off[VSC__SEC_DEVICES] + (size_t)slot * VSC__DEVICE;
    uint64_t seq = ch->device_seq[slot];
    uint64_t t = f->read_at_ns ? f->read_at_ns : vsc_now_ns();
    const uint64_t w[15] = {f->allocated, f->allocated_peak, f->reserved, f->reserved_peak, f->active,
                            f->inactive_split, f->requested, f->alloc_retries,
                            f->ooms, f->device_allocs,
                            f->device_frees, f->device_free, f->limit, f->interval_peak, f->step_peak};
    vsc__spare(ch, base, 0xB0, seq + 1);
    vsc__begin(ch, base, seq + 1);
    vsc__store(ch, base + 0x38, t);
    for (size_t i = 0; i < 15; i++) vsc__store(ch, base + 0x40 + 8 * i, w[i]);
    vsc__store_release(ch, base, seq + 2);
    ch->device_seq[slot] = seq + 2;
    if (!f->read_at_ns) vsc__store(ch, 0x028, t);
    return VSC_OK;
}

/* Stores ring record `idx` (spec section 4): odd seq, payload and CRC, even seq, head. */
static inline void vsc__append(vsc_channel *ch, int sec, size_t head_at, size_t size, const uint8_t *rec) {
    uint64_t idx = sec == VSC__SEC_SAMPLES ? ch->samples : ch->events;
    size_t base = ch->off[sec] + (size_t)(idx & (ch->cap[sec] - 1)) * size;
    vsc__begin(ch, base, 2 * idx + 1);
    for (size_t i = 8; i < size; i += 8) vsc__store(ch, base + i, vsc__get64(rec + i));
    vsc__store_release(ch, base, 2 * idx + 2);
    vsc__store_release(ch, head_at, idx + 1);
    if (sec == VSC__SEC_SAMPLES)
        ch->samples = idx + 1;
    else
        ch->events = idx + 1;
}

static inline int vsc_sample_append(vsc_channel *ch, const vsc_sample *s) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    if (s == NULL) return VSC_E_ARG;
    uint8_t rec[VSC__SAMPLE];
    uint64_t t = s->t_ns ? s->t_ns : vsc_now_ns();
    vsc__put64(rec + 0x08, t);
    vsc__put64(rec + 0x10, s->allocated);
    vsc__put64(rec + 0x18, s->reserved);
    vsc__put64(rec + 0x20, s->peak);
    vsc__put64(rec + 0x28, s->active);
    vsc__put64(rec + 0x30, s->step);
    rec[0x38] = s->slot;
    rec[0x39] = s->flags;
    vsc__put16(rec + 0x3A, s->phase);
    vsc__put32(rec + 0x3C, vsc__crc32((const uint32_t(*)[256])ch->crc_table, rec + 0x08, 0x3C - 0x08));
    vsc__append(ch, VSC__SEC_SAMPLES, 0x208, VSC__SAMPLE, rec);
    if (!s->t_ns) vsc__store(ch, 0x028, t);
    return VSC_OK;
}

static inline int vsc_event_append(vsc_channel *ch, const vsc_event *e) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    if (e == NULL) return VSC_E_ARG;
    uint8_t rec[VSC__EVENT];
    memset(rec, 0, sizeof rec);
    size_t len = vsc__fit(e->text, 172);
    vsc__put64(rec + 0x08, e->t_ns ? e->t_ns : vsc_now_ns());
    vsc__put16(rec + 0x10, e->kind);
    vsc__put16(rec + 0x12, e->slot);
    vsc__put16(rec + 0x14, e->phase);
    vsc__put16(rec + 0x16, (uint16_t)len);
    vsc__put64(rec + 0x18, e->step);
    for (int i = 0; i < 6; i++) vsc__put64(rec + 0x20 + 8 * i, e->args[i]);
    if (len) memcpy(rec + 0x50, e->text, len);
    vsc__put32(rec + 0xFC, vsc__crc32((const uint32_t(*)[256])ch->crc_table, rec + 0x08, 0xFC - 0x08));
    vsc__append(ch, VSC__SEC_EVENTS, 0x210, VSC__EVENT, rec);
    return VSC_OK;
}

/* The phase number of `name` for samples and events (string n-1 is phase n), adding it on
 * first use; 0 for an empty name or a full table. */
static inline int vsc__find_phase(const vsc_channel *ch, const char *name, size_t len) {
    const uint8_t *strings = ch->map + ch->off[VSC__SEC_STRINGS];
    for (uint32_t i = 0; i < ch->strings; i++) {
        const uint8_t *rec = strings + (size_t)i * VSC__STRING;
        if (rec[0] == len && memcmp(rec + 1, name, len) == 0) return (int)i + 1;
    }
    return 0;
}

static inline int vsc_phase(vsc_channel *ch, const char *name) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    size_t len = vsc__fit(name, 63);
    if (len == 0) return 0;
    int found = vsc__find_phase(ch, name, len);
    if (found) return found;
    if (ch->strings >= ch->cap[VSC__SEC_STRINGS]) return 0;
    uint8_t *rec = ch->map + ch->off[VSC__SEC_STRINGS] + (size_t)ch->strings * VSC__STRING;
    rec[0] = (uint8_t)len;
    memcpy(rec + 1, name, len);
    ch->strings++;
    /* Written once, before the count makes it visible. */
    vsc__store_release(ch, 0x218, ch->strings);
    return (int)ch->strings;
}

/* Sets the status (spec section 2.4): the current step (VSC_ABSENT: none) and a label. */
static inline int vsc_status(vsc_channel *ch, uint64_t step, const char *label) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    uint8_t text[160];
    size_t len = vsc__fit(label, sizeof text);
    memset(text, 0, sizeof text);
    if (len) memcpy(text, label, len);
    uint64_t seq = ch->status_seq;
    vsc__spare(ch, 0x240, 0xB8, seq + 1);
    vsc__begin(ch, 0x240, seq + 1);
    vsc__store(ch, 0x248, step);
    vsc__store(ch, 0x250, vsc_now_ns());
    vsc__store(ch, 0x258, len);
    for (size_t i = 0; i < sizeof text; i += 8) vsc__store(ch, 0x260 + i, vsc__get64(text + i));
    vsc__store_release(ch, 0x240, seq + 2);
    ch->status_seq = seq + 2;
    return VSC_OK;
}

/* Reports an out-of-memory on `slot`: an allocation of `requested` bytes failed, with
 * `device_free` bytes free on the device (either VSC_ABSENT when unknown). For OOMs that no
 * allocator observer reports: a program that catches one and skips the batch, a custom
 * allocator.
 * Appends an OOM event at the step and with the label last given to vsc_status (its phase
 * when the label is one from vsc_phase), carrying the slot's total and the allocated,
 * reserved and retry figures last published for it. The slot's OOMs figure stays the
 * program's own count: the monitor counts the events and takes the larger of the two, so an
 * OOM the program counted and also reported here is one OOM. */
static inline int vsc_oom(vsc_channel *ch, int slot, uint64_t requested, uint64_t device_free) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    if (slot < 0 || (uint32_t)slot >= ch->devices) return VSC_E_ARG;
    size_t base = ch->off[VSC__SEC_DEVICES] + (size_t)slot * VSC__DEVICE;
    const uint8_t *dev = ch->map + base;
    char label[161];
    size_t len = 0;
    vsc_event e;
    vsc_event_init(&e, VSC_EV_OOM);
    if (ch->status_seq != 0) {
        len = (size_t)vsc__get64(ch->map + 0x258);
        if (len > 160) len = 160;
        memcpy(label, ch->map + 0x260, len);
        e.step = vsc__get64(ch->map + 0x248);
    }
    label[len] = '\0';
    e.slot = (uint16_t)slot;
    e.phase = len && len <= 63 ? (uint16_t)vsc__find_phase(ch, label, len) : 0;
    e.text = label;
    e.args[0] = requested;
    e.args[1] = device_free;
    e.args[2] = vsc__get64(dev + 0x30);
    e.args[3] = vsc__get64(dev + 0x40);
    e.args[4] = vsc__get64(dev + 0x50);
    e.args[5] = vsc__get64(dev + 0x78);
    vsc_event_append(ch, &e);
    return VSC_OK;
}

/* Marks the writer alive; needed at least once per sample period when nothing else does it. */
static inline int vsc_heartbeat(vsc_channel *ch) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    vsc__store(ch, 0x028, vsc_now_ns());
    return VSC_OK;
}

/* Ends the channel. error_text NULL: EXIT event, EXITED_CLEAN, the file removed. Otherwise:
 * EXIT event with the text, EXITED_ERROR, the file kept for the monitor. */
static inline int vsc_finish(vsc_channel *ch, const char *error_text) {
    if (!vsc__usable(ch)) return VSC_E_CLOSED;
    vsc_event e;
    vsc_event_init(&e, VSC_EV_EXIT);
    e.args[0] = error_text ? 1 : 0;
    e.text = error_text;
    vsc_event_append(ch, &e);
    vsc_heartbeat(ch);
    vsc__store_release(ch, 0x020, error_text ? VSC_STATE_EXITED_ERROR : VSC_STATE_EXITED_CLEAN);
    if (!error_text) {
        /* Only our own name: a newer channel of this process may have replaced it. */
        struct stat st;
        if (fstatat(ch->dir_fd, ch->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == ch->dev && st.st_ino == ch->ino)
            unlinkat(ch->dir_fd, ch->name, 0);
    }
    munmap(ch->map, ch->size);
    ch->map = NULL;
    close(ch->fd);
    close(ch->dir_fd);
    ch->fd = ch->dir_fd = -1;
    ch->live = 0;
    vsc__unregister(ch);
    return VSC_OK;
}

#endif /* VRAMSCOPE_CHANNEL_H */
