#include <stdlib.h>
#include <string.h>

#include "wordstat.h"

static size_t bucket_of(const struct table *table, const char *word)
{
    return (size_t)(fnv1a64(word) % table->bucket_count);
}

int table_init(struct table *table, size_t bucket_count)
{
    table->buckets = calloc(bucket_count, sizeof *table->buckets);
    table->bucket_count = bucket_count;
    table->size = 0;
    return table->buckets != NULL;
}

void table_add(struct table *table, const char *word)
{
    size_t bucket = bucket_of(table, word);
    struct entry *entry;
    for (entry = table->buckets[bucket]; entry != NULL; entry = entry->next) {
        if (strcmp(entry->word, word) == 0) {
            entry->count++;
            return;
        }
    }
    entry = malloc(sizeof *entry);
    if (entry == NULL)
        return;
    strncpy(entry->word, word, MAX_WORD - 1);
    entry->word[MAX_WORD - 1] = '\0';
    entry->count = 1;
    entry->next = table->buckets[bucket];
    table->buckets[bucket] = entry;
    table->size++;
}

static int more_frequent(const void *left, const void *right)
{
    const struct entry *a = *(const struct entry *const *)left;
    const struct entry *b = *(const struct entry *const *)right;
    if (a->count != b->count)
        return a->count < b->count ? 1 : -1;
    return strcmp(a->word, b->word);
}

size_t table_sorted(const struct table *table, struct entry **out, size_t limit)
{
    size_t found = 0;
    struct entry **all = malloc((table->size + 1) * sizeof *all);
    if (all == NULL)
        return 0;
    for (size_t bucket = 0; bucket < table->bucket_count; bucket++)
        for (struct entry *entry = table->buckets[bucket]; entry != NULL; entry = entry->next)
            all[found++] = entry;
    qsort(all, found, sizeof *all, more_frequent);
    if (found > limit)
        found = limit;
    memcpy(out, all, found * sizeof *all);
    free(all);
    return found;
}

void table_free(struct table *table)
{
    for (size_t bucket = 0; bucket < table->bucket_count; bucket++) {
        struct entry *entry = table->buckets[bucket];
        while (entry != NULL) {
            struct entry *next = entry->next;
            free(entry);
            entry = next;
        }
    }
    free(table->buckets);
}
