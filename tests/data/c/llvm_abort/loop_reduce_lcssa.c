/* LLVM 20.1.8 as built for llvmlite 0.47 (assertions on) aborts on this function with the pass list
   "sroa loop-reduce": "Loops must remain in LCSSA form!". The compiler pool must contain that crash. */
struct ns { const char *href; };
struct node { void *a; int kind; struct ns *ns; };
long get_memory(long size);
int same_text(const char *a, const char *b);

void collect(struct node *owner, struct node *node) {
    struct ns *found;
    struct ns **list;
    int count = 0, capacity = 10, i;
    if (owner == 0 || owner->kind != 0 || owner->ns != 0)
        return;
    while (node != 0) {
        found = node->ns;
        list = (struct ns **)get_memory((capacity + 1) * sizeof(struct ns *));
        for (i = 0; i < count; i++) {
            if (found->href == list[i]->href || same_text(found->href, 0))
                break;
        }
        if (i >= count) {
            if (count >= capacity)
                return;
            list[count++] = found;
        }
    }
}
