/* sharedcount: counts the calls of every instance of every filter with its
 * vm_id in the host's shared data (ABI v1.1), with a compare-and-swap loop
 * so that no increment is lost when instances race; sets the attachment
 * x-count to the count it wrote and x-counted-by to the filter's name (a
 * property), and counts its calls in the metric "requests" too. The value
 * is stored as 8 little-endian bytes. The other v1.1 capabilities, in a few
 * lines each: a tick every 20 ms counted in "ticks", and each call
 * enqueued on the shared queue "seen", whose items the queue callback
 * counts in "dequeued". */
#include "../weft.h"

static uint32_t requests, ticks, dequeued, seen;
static int ready;

/* setup defines the metrics (again: the same ids) and registers the queue
 * in whichever callback runs first on this instance. */
static void setup(void) {
    if (ready) return;
    weft_metric_define(WEFT_METRIC_COUNTER, WEFT_LIT("requests"), &requests);
    weft_metric_define(WEFT_METRIC_COUNTER, WEFT_LIT("ticks"), &ticks);
    weft_metric_define(WEFT_METRIC_COUNTER, WEFT_LIT("dequeued"), &dequeued);
    weft_queue_register(WEFT_LIT("seen"), &seen);
    weft_set_tick_period(20);
    ready = 1;
}

static int32_t on_request(void) {
    setup();
    int64_t n;
    for (;;) {
        weft_str cur;
        uint32_t cas = 0;
        n = 0;
        int32_t st = weft_shared_get(WEFT_LIT("calls"), &cur, &cas);
        if (st == WEFT_OK && cur.len == 8) {
            for (int i = 7; i >= 0; i--) n = (n << 8) | (uint8_t)cur.ptr[i];
        }
        n++;
        char le[8];
        for (int i = 0; i < 8; i++) le[i] = (char)(n >> (8 * i));
        st = weft_shared_set(WEFT_LIT("calls"), (weft_str){le, 8}, st == WEFT_OK ? cas : 0);
        if (st == WEFT_OK) break;
        if (st != WEFT_CAS_MISMATCH) return weft_reject(WEFT_CODE_UNKNOWN, WEFT_LIT("sharedcount: shared_set failed"));
    }
    weft_buf v = weft_buf_arena(24);
    weft_buf_i64(&v, n);
    weft_set_attachment(WEFT_LIT("x-count"), weft_buf_str(&v));
    /* Which filter counted: a property, as proxy-wasm filters read them. */
    weft_str name;
    if (weft_get_property(WEFT_LIT("plugin_name"), &name) == WEFT_OK) weft_set_attachment(WEFT_LIT("x-counted-by"), name);
    weft_metric_add(requests, 1);
    weft_queue_enqueue(seen, WEFT_LIT("1"));
    return WEFT_CONTINUE;
}

static void on_tick(void) {
    setup();
    weft_metric_add(ticks, 1);
}

static void on_queue_ready(uint32_t id) {
    setup();
    weft_str item;
    while (weft_queue_dequeue(id, &item) == WEFT_OK) weft_metric_add(dequeued, 1);
}

WEFT_ON_REQUEST(on_request)
WEFT_ON_TICK(on_tick)
WEFT_ON_QUEUE_READY(on_queue_ready)
