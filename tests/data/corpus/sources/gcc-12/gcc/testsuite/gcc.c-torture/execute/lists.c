struct node {
  int value;
  struct node *next;
};

int list_length(const struct node *n) {
  int len = 0;
  while (n) {
    len++;
    n = n->next;
  }
  return len;
}

struct node *list_reverse(struct node *n) {
  struct node *prev = 0;
  while (n) {
    struct node *next = n->next;
    n->next = prev;
    prev = n;
    n = next;
  }
  return prev;
}

int list_max(const struct node *n, int empty) {
  int best = empty;
  for (; n; n = n->next)
    if (n->value > best)
      best = n->value;
  return best;
}
