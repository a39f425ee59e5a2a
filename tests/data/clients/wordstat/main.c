#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wordstat.h"

#define TOP 10

static char *read_all(FILE *stream, size_t *length)
{
    size_t capacity = 4096;
    char *buffer = malloc(capacity);
    *length = 0;
    while (buffer != NULL) {
        size_t got = fread(buffer + *length, 1, capacity - *length - 1, stream);
        *length += got;
        if (got == 0)
            break;
        if (capacity - *length - 1 == 0) {
            char *bigger = realloc(buffer, capacity * 2);
            if (bigger == NULL) {
                free(buffer);
                return NULL;
            }
            buffer = bigger;
            capacity *= 2;
        }
    }
    if (buffer != NULL)
        buffer[*length] = '\0';
    return buffer;
}

int main(void)
{
    size_t length, position = 0, words = 0;
    char word[MAX_WORD];
    struct entry *top[TOP];
    struct table table;
    char *text = read_all(stdin, &length);
    if (text == NULL || !table_init(&table, 257)) {
        fprintf(stderr, "wordstat: out of memory\n");
        return 1;
    }
    while (next_word(text, &position, word) > 0) {
        lowercase(word);
        table_add(&table, word);
        words++;
    }
    printf("bytes %zu words %zu distinct %zu crc32 %08x\n", length, words, table.size,
           (unsigned)crc32_of((const unsigned char *)text, length));
    size_t shown = table_sorted(&table, top, TOP);
    for (size_t i = 0; i < shown; i++)
        printf("%4u %-20s %016llx\n", top[i]->count, top[i]->word, (unsigned long long)fnv1a64(top[i]->word));
    table_free(&table);
    free(text);
    return 0;
}
