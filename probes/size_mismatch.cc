// size-mismatch: an array made with new[] of a type with a destructor, released with scalar delete.
// The array cookie makes the pointer handed to operator delete an interior pointer of the block.
// Primitive: a later allocation lands inside the still-live array block.
extern "C" {
#include "probe.h"
}

struct Item {
    long v;
    ~Item() { v = 0; }
};

int main()
{
    Item *arr = new Item[6];
    char *lo = reinterpret_cast<char *>(arr) - sizeof(long);
    char *hi = reinterpret_cast<char *>(arr + 6);
    Item *alias = static_cast<Item *>(launder(arr));
    delete alias;  // the misuse: delete instead of delete[]
    probe_mark("misuse-done");
    int inside = 0;
    for (int i = 0; i < 16; i++) {
        char *q = static_cast<char *>(::operator new(40));
        if (q + 40 > lo && q < hi)
            inside++;
    }
    probe_result("worked=%d inside=%d", inside > 0, inside);
    probe_go_on();
    return 0;
}
