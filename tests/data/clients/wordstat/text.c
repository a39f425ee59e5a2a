#include <ctype.h>

#include "wordstat.h"

static int is_word_char(int c)
{
    return isalnum(c) || c == '\'' || c == '_';
}

size_t next_word(const char *text, size_t *position, char *word)
{
    size_t length = 0;
    size_t at = *position;
    while (text[at] != '\0' && !is_word_char((unsigned char)text[at]))
        at++;
    while (text[at] != '\0' && is_word_char((unsigned char)text[at])) {
        if (length < MAX_WORD - 1)
            word[length++] = text[at];
        at++;
    }
    word[length] = '\0';
    *position = at;
    return length;
}

void lowercase(char *word)
{
    for (; *word != '\0'; word++)
        *word = (char)tolower((unsigned char)*word);
}
