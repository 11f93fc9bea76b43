/* dom-churn: re-creates the browser heap profile of seed 002 (mozjemalloc poisoning measured on
 * Speedometer): DOM-like trees of small nodes with tag, attribute and text strings and growable
 * child arrays are built, mutated (attributes rewritten, text appended, subtrees inserted and
 * removed), serialized into a growing buffer, and torn down, round after round. */
#include "wl_common.h"

struct node {
    char *tag;
    char **attrs;       /* nattr (name, value) pairs, 2 * nattr strings */
    int nattr;
    char *text;         /* NULL or a NUL-terminated string */
    size_t textlen;
    struct node **kids;
    int nkids, cap;
};

static char *rand_string(uint64_t *rng, size_t min, size_t max)
{
    size_t n = min + (size_t)wl_below(rng, max - min + 1);
    char *s = wl_malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)('a' + wl_below(rng, 26));
    s[n] = '\0';
    return s;
}

static void add_kid(struct node *parent, struct node *kid, int pos)
{
    if (parent->nkids == parent->cap) {
        parent->cap = parent->cap ? 2 * parent->cap : 2;
        parent->kids = wl_realloc(parent->kids, (size_t)parent->cap * sizeof *parent->kids);
    }
    memmove(parent->kids + pos + 1, parent->kids + pos,
            (size_t)(parent->nkids - pos) * sizeof *parent->kids);
    parent->kids[pos] = kid;
    parent->nkids++;
}

static struct node *make_tree(uint64_t *rng, int depth)
{
    struct node *n = wl_malloc(sizeof *n);
    wl_turn();
    n->tag = rand_string(rng, 1, 10);
    n->nattr = (int)wl_below(rng, 4);
    n->attrs = n->nattr ? wl_malloc(2 * (size_t)n->nattr * sizeof *n->attrs) : NULL;
    for (int i = 0; i < 2 * n->nattr; i++)
        n->attrs[i] = rand_string(rng, 2, i % 2 ? 40 : 12);
    n->text = wl_below(rng, 3) == 0 ? rand_string(rng, 0, 80) : NULL;
    n->textlen = n->text ? strlen(n->text) : 0;
    n->kids = NULL;
    n->nkids = n->cap = 0;
    int fanout = depth > 0 ? (int)wl_below(rng, 7) : 0;
    for (int i = 0; i < fanout; i++)
        add_kid(n, make_tree(rng, depth - 1), n->nkids);
    return n;
}

static void free_tree(struct node *n)
{
    wl_turn();
    for (int i = 0; i < n->nkids; i++)
        free_tree(n->kids[i]);
    for (int i = 0; i < 2 * n->nattr; i++)
        free(n->attrs[i]);
    free(n->attrs);
    free(n->kids);
    free(n->text);
    free(n->tag);
    free(n);
}

static struct node *random_node(uint64_t *rng, struct node *root)
{
    struct node *n = root;
    while (n->nkids > 0 && wl_below(rng, 4) != 0)
        n = n->kids[wl_below(rng, (uint64_t)n->nkids)];
    return n;
}

static void mutate(uint64_t *rng, struct node *root)
{
    struct node *n = random_node(rng, root);
    switch (wl_below(rng, 5)) {
    case 0:  /* set an attribute value */
        if (n->nattr > 0) {
            int i = 2 * (int)wl_below(rng, (uint64_t)n->nattr) + 1;
            free(n->attrs[i]);
            n->attrs[i] = rand_string(rng, 0, 60);
        }
        break;
    case 1: {  /* append to the text */
        char *more = rand_string(rng, 1, 30);
        size_t add = strlen(more);
        n->text = wl_realloc(n->text, n->textlen + add + 1);
        memcpy(n->text + n->textlen, more, add + 1);
        n->textlen += add;
        free(more);
        break;
    }
    case 2:  /* insert a small subtree */
        add_kid(n, make_tree(rng, 2), (int)wl_below(rng, (uint64_t)n->nkids + 1));
        break;
    case 3:  /* remove a child subtree */
        if (n->nkids > 0) {
            int i = (int)wl_below(rng, (uint64_t)n->nkids);
            free_tree(n->kids[i]);
            memmove(n->kids + i, n->kids + i + 1, (size_t)(n->nkids - i - 1) * sizeof *n->kids);
            n->nkids--;
        }
        break;
    default:  /* add an attribute */
        n->attrs = wl_realloc(n->attrs, 2 * (size_t)(n->nattr + 1) * sizeof *n->attrs);
        n->attrs[2 * n->nattr] = rand_string(rng, 2, 12);
        n->attrs[2 * n->nattr + 1] = rand_string(rng, 0, 40);
        n->nattr++;
        break;
    }
}

struct buf {
    char *data;
    size_t len, cap;
};

static void put(struct buf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        while (b->len + n + 1 > b->cap)
            b->cap = b->cap ? 2 * b->cap : 256;
        b->data = wl_realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, s, n + 1);
    b->len += n;
}

static void serialize(struct buf *b, const struct node *n)
{
    put(b, "<");
    put(b, n->tag);
    for (int i = 0; i < n->nattr; i++) {
        put(b, " ");
        put(b, n->attrs[2 * i]);
        put(b, "=\"");
        put(b, n->attrs[2 * i + 1]);
        put(b, "\"");
    }
    put(b, ">");
    if (n->text)
        put(b, n->text);
    for (int i = 0; i < n->nkids; i++)
        serialize(b, n->kids[i]);
    put(b, "</");
    put(b, n->tag);
    put(b, ">");
}

int main(int argc, char **argv)
{
    double scale = wl_scale(argc, argv), work = 60 * scale;
    long rounds = wl_scaled(scale, 60), mutations = 3000;
    int depth = 7;
    /* below one round, shrink the round instead: fewer mutations, shallower trees (a level
     * holds about 3x the nodes of the one above), so slow allocators can run a true fraction */
    if (work < 1.0) {
        mutations = wl_scaled(work, 3000);
        for (double w = work; w < 1.0 / 3 && depth > 2; w *= 3)
            depth--;
    }
    uint64_t rng = 2, h = wl_fnv_u64(wl_fnv_u64(WL_FNV_INIT, (uint64_t)rounds), (uint64_t)mutations);

    for (long r = 0; r < rounds; r++) {
        struct node *root = make_tree(&rng, depth);
        for (long m = 0; m < mutations; m++) {
            mutate(&rng, root);
            wl_turn();
            if (m % 1000 == 999) {  /* an occasional "innerHTML" of a subtree */
                struct buf b = {0};
                serialize(&b, random_node(&rng, root));
                h = wl_fnv_u64(h, b.len);
                free(b.data);
            }
        }
        struct buf b = {0};
        serialize(&b, root);
        h = wl_fnv_bytes(h, b.data, b.len);
        free(b.data);
        free_tree(root);
    }
    wl_print_checksum(h);
    return 0;
}
