/* Switch statements: dense, sparse, fall-through, and a small state machine. */
int days_in_month(int month, int leap) {
    switch (month) {
    case 2:
        return leap ? 29 : 28;
    case 4: case 6: case 9: case 11:
        return 30;
    default:
        return 31;
    }
}

const char *http_reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 301: return "Moved Permanently";
    case 404: return "Not Found";
    case 500: return "Internal Server Error";
    default: return "Unknown";
    }
}

int count_words(const char *text) {
    enum { OUTSIDE, INSIDE } state = OUTSIDE;
    int words = 0;
    for (; *text; text++) {
        switch (*text) {
        case ' ': case '\t': case '\n':
            state = OUTSIDE;
            break;
        default:
            if (state == OUTSIDE)
                words++;
            state = INSIDE;
        }
    }
    return words;
}
