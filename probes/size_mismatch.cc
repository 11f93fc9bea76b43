// size-mismatch: an array of <size>/8 items (at least 2) of a type with a destructor, made with new[]
// and released with scalar delete. The array cookie makes the pointer handed to operator delete an
// interior pointer of the block. Primitive: a later operator new (40 bytes, then the array's size)
// lands inside the still-live array block; searched over 100,000 allocations each.
extern "C" {
#include "probe.h"
}
#include <new>

struct Item {
    long v;
    ~Item() { v = 0; }
};

static void *pnew(size_t n)
{
    probe_call_begin(PC_NEW);
    void *p = ::operator new(n);
    probe_call_end();
    return p;
}

static void pdelete(void *p)
{
    probe_call_begin(PC_DELETE);
    ::operator delete(p);
    probe_call_end();
}

int main(int argc, char **argv)
{
    size_t size = probe_size(argc, argv, 48);
    size_t count = size / sizeof(Item) < 2 ? 2 : size / sizeof(Item);
    for (int i = 0; i < PROBE_NEIGHBOURS; i++)
        probe_live_add(pnew(size), size);
    probe_call_begin(PC_NEW);
    Item *arr = new Item[count];
    probe_call_end();
    char *lo = reinterpret_cast<char *>(arr) - sizeof(long);
    char *hi = reinterpret_cast<char *>(arr + count);
    probe_live_add(lo, (size_t)(hi - lo));
    Item *alias = static_cast<Item *>(launder(arr));
    probe_mark("setup-done");
    probe_call_begin(PC_DELETE);
    delete alias;  // the misuse: delete instead of delete[]
    probe_call_end();
    probe_mark("misuse-done");
    struct probe_hunt h = {};
    h.window = PROBE_WINDOW;
    h.alloc = pnew;
    h.release = pdelete;
    size_t tries[2] = {40, (size_t)(hi - lo)};
    for (int t = 0; t < 2 && h.why == PROBE_HUNT_NONE; t++) {
        h.size = tries[t];
        probe_hunt(&h);
    }
    int worked = h.why == PROBE_HUNT_OVERLAP;
    if (worked)
        probe_mark("primitive");
    probe_result("worked=%d size=%zu step=%lu items=%zu inside_array=%d", worked, size, worked ? h.step : 0ul, count,
                 worked && h.hit_other == lo);
    probe_go_on();
    return 0;
}
