/* wordstat: counts words of its input in a hash table, prints the most frequent ones and checksums. */
#ifndef WORDSTAT_H
#define WORDSTAT_H

#include <stddef.h>
#include <stdint.h>

#define MAX_WORD 64

struct entry {
    char word[MAX_WORD];
    unsigned count;
    struct entry *next;
};

struct table {
    struct entry **buckets;
    size_t bucket_count;
    size_t size;
};

/* table.c */
int table_init(struct table *table, size_t bucket_count);
void table_add(struct table *table, const char *word);
size_t table_sorted(const struct table *table, struct entry **out, size_t limit);
void table_free(struct table *table);

/* text.c */
size_t next_word(const char *text, size_t *position, char *word);
void lowercase(char *word);

/* checksum.c */
uint32_t crc32_of(const unsigned char *data, size_t length);
uint64_t fnv1a64(const char *text);

#endif
