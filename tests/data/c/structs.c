/* Structs: passed by pointer and by value, nested, arrays of structs, a linked list. */
struct point { int x, y; };
struct rect { struct point min, max; };
struct node { int value; struct node *next; };

int area(struct rect r) {
    return (r.max.x - r.min.x) * (r.max.y - r.min.y);
}

void translate(struct rect *r, struct point by) {
    r->min.x += by.x;
    r->min.y += by.y;
    r->max.x += by.x;
    r->max.y += by.y;
}

struct point centroid(const struct point *points, int count) {
    struct point sum = {0, 0};
    for (int i = 0; i < count; i++) {
        sum.x += points[i].x;
        sum.y += points[i].y;
    }
    if (count > 0) {
        sum.x /= count;
        sum.y /= count;
    }
    return sum;
}

int list_length(const struct node *head) {
    int length = 0;
    for (; head; head = head->next)
        length++;
    return length;
}
