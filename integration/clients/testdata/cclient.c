// The ZooKeeper C client (libzookeeper_mt) against a server (argv[1]: host:port), for
// integration/cclient_test.go. Each step prints what a user of the C API relies on, in lines that
// do not depend on timing, so that zetcd's and ZooKeeper's outputs can be compared line for line.
// A step that does not finish in time prints a FAIL line and the program exits 1.
//
// The C client registers a watch only when it processes the reply of the request that set it: an
// event the server sends before that reply is not delivered to the watch, and the step waiting for
// it fails. Completions run on one thread in the order the replies and events arrived, so the
// order printed by "pipelined" is the order of the frames on the wire.
// The synchronous calls exist only in the multi-threaded library.
#define THREADED
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zookeeper/zookeeper.h>

#define WAIT_SECONDS 30
#define MAX_NOTES 256

// notes are what watchers and completions report, in the order they ran (on the client's
// completion threads), guarded by mu.
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static char *notes[MAX_NOTES];
static int nnotes, taken, connected;

static void fail(const char *step, const char *why) {
    printf("FAIL %s: %s\n", step, why);
    fflush(stdout);
    exit(1);
}

static void note(const char *text) {
    pthread_mutex_lock(&mu);
    if (nnotes < MAX_NOTES) {
        notes[nnotes++] = strdup(text);
    }
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static const char *event_name(int type) {
    if (type == ZOO_CREATED_EVENT) return "CREATED";
    if (type == ZOO_DELETED_EVENT) return "DELETED";
    if (type == ZOO_CHANGED_EVENT) return "CHANGED";
    if (type == ZOO_CHILD_EVENT) return "CHILD";
    if (type == ZOO_NOTWATCHING_EVENT) return "NOTWATCHING";
    return "OTHER";
}

// watcher notes a watch event as "<ctx> <type> <path>"; session events count connections.
static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh;
    if (type == ZOO_SESSION_EVENT) {
        pthread_mutex_lock(&mu);
        if (state == ZOO_CONNECTED_STATE) {
            connected++;
        }
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&mu);
        return;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s %s %s", (const char *)ctx, event_name(type), path);
    note(buf);
}

static struct timespec deadline(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += WAIT_SECONDS;
    return ts;
}

// await_notes waits until n notes beyond those taken are there, and returns the first of them;
// the caller takes them by advancing taken.
static void await_notes(const char *step, int n) {
    struct timespec ts = deadline();
    pthread_mutex_lock(&mu);
    while (nnotes < taken + n) {
        if (pthread_cond_timedwait(&cond, &mu, &ts) != 0) {
            pthread_mutex_unlock(&mu);
            fail(step, "no event");
        }
    }
    pthread_mutex_unlock(&mu);
}

// print_notes waits for n more notes and prints each, prefixed with step.
static void print_notes(const char *step, int n) {
    await_notes(step, n);
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n; i++) {
        printf("%s %s\n", step, notes[taken++]);
    }
    pthread_mutex_unlock(&mu);
}

// open_handle opens a session and waits for it.
static zhandle_t *open_handle(const char *addr) {
    pthread_mutex_lock(&mu);
    int want = connected + 1;
    pthread_mutex_unlock(&mu);
    zhandle_t *zh = zookeeper_init(addr, watcher, 10000, 0, "session", 0);
    if (zh == NULL) {
        fail("connect", "zookeeper_init");
    }
    struct timespec ts = deadline();
    pthread_mutex_lock(&mu);
    while (connected < want) {
        if (pthread_cond_timedwait(&cond, &mu, &ts) != 0) {
            pthread_mutex_unlock(&mu);
            fail("connect", "no session");
        }
    }
    pthread_mutex_unlock(&mu);
    return zh;
}

static void string_done(int rc, const char *value, const void *data) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s %s %s", (const char *)data, zerror(rc), rc == ZOK ? value : "-");
    note(buf);
}

static void strings_done(int rc, const struct String_vector *strings, const void *data) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s %s %d", (const char *)data, zerror(rc), rc == ZOK ? strings->count : -1);
    note(buf);
}

static void void_done(int rc, const void *data) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s %s", (const char *)data, zerror(rc));
    note(buf);
}

// seq_done records the order in which the pipelined creates complete and the names they got.
static int seq_order[50], seq_count;
static char seq_names[50][64];

static void seq_done(int rc, const char *value, const void *data) {
    pthread_mutex_lock(&mu);
    int i = (int)(intptr_t)data;
    seq_order[seq_count] = rc == ZOK ? i : -1;
    snprintf(seq_names[seq_count], sizeof seq_names[0], "%s", rc == ZOK ? value : "");
    seq_count++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static void basics(zhandle_t *a, zhandle_t *b) {
    char path[128], data[64];
    int len = sizeof data;
    struct Stat st;
    int rc = zoo_create(a, "/c", "v0", 2, &ZOO_OPEN_ACL_UNSAFE, 0, path, sizeof path);
    printf("create %s %s\n", zerror(rc), rc == ZOK ? path : "-");
    rc = zoo_create(a, "/c", "v0", 2, &ZOO_OPEN_ACL_UNSAFE, 0, path, sizeof path);
    printf("create again %s\n", zerror(rc));

    rc = zoo_wget(a, "/c", watcher, "data", data, &len, &st);
    printf("wget %s %.*s version=%d\n", zerror(rc), len, data, st.version);
    rc = zoo_set(b, "/c", "v1", 2, -1);
    printf("set %s\n", zerror(rc));
    print_notes("watch", 1);

    rc = zoo_wexists(a, "/c/new", watcher, "exists", &st);
    printf("wexists %s\n", zerror(rc));
    rc = zoo_create(b, "/c/new", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, path, sizeof path);
    printf("create %s %s\n", zerror(rc), rc == ZOK ? path : "-");
    print_notes("watch", 1);

    struct String_vector kids;
    rc = zoo_wget_children2(a, "/c", watcher, "children", &kids, &st);
    printf("wget_children2 %s count=%d numChildren=%d\n", zerror(rc), kids.count, st.numChildren);
    deallocate_String_vector(&kids);
    rc = zoo_create(b, "/c/k2", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, path, sizeof path);
    printf("create %s %s\n", zerror(rc), rc == ZOK ? path : "-");
    print_notes("watch", 1);

    rc = zoo_delete(a, "/c", -1);
    printf("delete non-empty %s\n", zerror(rc));
    rc = zoo_delete(a, "/c/k2", 5);
    printf("delete wrong version %s\n", zerror(rc));
}

// pipelined sends, without waiting, a getChildren that sets a watch and then a create that
// fires it, on one session: the watch's reply must come before its event, and the event before
// the create's reply.
static void pipelined(zhandle_t *a) {
    int rc = zoo_awget_children(a, "/c", watcher, "event", strings_done, "getChildren");
    if (rc == ZOK) {
        rc = zoo_acreate(a, "/c/p", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, string_done, "create");
    }
    if (rc != ZOK) {
        fail("pipelined", zerror(rc));
    }
    print_notes("pipelined", 3);

    // Fifty sequential creates in flight at once complete in the order sent, with names in
    // that order.
    for (int i = 0; i < 50; i++) {
        rc = zoo_acreate(a, "/c/seq-", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, seq_done, (void *)(intptr_t)i);
        if (rc != ZOK) {
            fail("pipelined creates", zerror(rc));
        }
    }
    struct timespec ts = deadline();
    pthread_mutex_lock(&mu);
    while (seq_count < 50) {
        if (pthread_cond_timedwait(&cond, &mu, &ts) != 0) {
            pthread_mutex_unlock(&mu);
            fail("pipelined creates", "not all completed");
        }
    }
    int in_order = 1, increasing = 1;
    for (int i = 0; i < 50; i++) {
        in_order &= seq_order[i] == i;
        increasing &= i == 0 || strcmp(seq_names[i - 1], seq_names[i]) < 0;
    }
    pthread_mutex_unlock(&mu);
    printf("pipelined creates=50 inOrder=%d namesIncreasing=%d first=%s last=%s\n", in_order, increasing,
           seq_names[0], seq_names[49]);
}

static void multi(zhandle_t *a) {
    char path[128];
    zoo_op_t ops[3];
    zoo_op_result_t results[3];
    zoo_create_op_init(&ops[0], "/c/m", "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, path, sizeof path);
    zoo_set_op_init(&ops[1], "/c", "v2", 2, -1, NULL);
    zoo_check_op_init(&ops[2], "/c", 99);
    int rc = zoo_multi(a, 3, ops, results);
    printf("multi failing %s results=%s,%s,%s\n", zerror(rc), zerror(results[0].err), zerror(results[1].err),
           zerror(results[2].err));
    struct Stat st;
    rc = zoo_exists(a, "/c/m", 0, &st);
    printf("multi failing left /c/m %s\n", zerror(rc));

    struct Stat set_stat;
    zoo_create_op_init(&ops[0], "/c/m", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, path, sizeof path);
    zoo_set_op_init(&ops[1], "/c", "v2", 2, 1, &set_stat);
    zoo_check_op_init(&ops[2], "/c", 2);
    rc = zoo_multi(a, 3, ops, results);
    printf("multi holding %s results=%s,%s,%s path=%s version=%d\n", zerror(rc), zerror(results[0].err),
           zerror(results[1].err), zerror(results[2].err), rc == ZOK ? path : "-", rc == ZOK ? set_stat.version : -1);
}

// ephemeral: a node of a session that closes is deleted, and a watch on it fires.
static void ephemeral(const char *addr, zhandle_t *a) {
    zhandle_t *e = open_handle(addr);
    char path[128];
    int rc = zoo_create(e, "/c/eph", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, path, sizeof path);
    printf("create ephemeral %s\n", zerror(rc));
    struct Stat st;
    rc = zoo_wexists(a, "/c/eph", watcher, "ephemeral", &st);
    printf("wexists %s owned=%d\n", zerror(rc), st.ephemeralOwner == zoo_client_id(e)->client_id);
    zookeeper_close(e);
    print_notes("watch", 1);
}

// auth: a node created with CREATOR_ALL_ACL by a digest identity is refused to another session.
static void auth(zhandle_t *a, zhandle_t *b) {
    int rc = zoo_add_auth(a, "digest", "user:secret", 11, void_done, "auth");
    if (rc != ZOK) {
        fail("auth", zerror(rc));
    }
    print_notes("auth", 1);
    char path[128], data[64];
    rc = zoo_create(a, "/c/acl", "x", 1, &ZOO_CREATOR_ALL_ACL, 0, path, sizeof path);
    printf("create creator-all %s\n", zerror(rc));
    int len = sizeof data;
    struct Stat st;
    rc = zoo_get(b, "/c/acl", 0, data, &len, &st);
    printf("get as another %s\n", zerror(rc));
    len = sizeof data;
    rc = zoo_get(a, "/c/acl", 0, data, &len, &st);
    printf("get as creator %s %.*s\n", zerror(rc), len, data);
    struct ACL_vector acl;
    rc = zoo_get_acl(b, "/c/acl", &acl, &st);
    if (rc == ZOK && acl.count == 1) {
        printf("get_acl %s %s:%s perms=%d\n", zerror(rc), acl.data[0].id.scheme, acl.data[0].id.id, acl.data[0].perms);
    } else {
        printf("get_acl %s count=%d\n", zerror(rc), rc == ZOK ? acl.count : -1);
    }
    if (rc == ZOK) {
        deallocate_ACL_vector(&acl);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: cclient host:port\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *a = open_handle(argv[1]), *b = open_handle(argv[1]);
    basics(a, b);
    pipelined(a);
    multi(a);
    ephemeral(argv[1], a);
    auth(a, b);
    zookeeper_close(a);
    zookeeper_close(b);
    return 0;
}
