// optcc's native thin client: the hot path of clients/resident_client.py without a Python start. The
// installed `optcc` (a POSIX sh script, clients/sh-scripts/optcc) execs it as `optcc-client WRAPPER ARGS...`, where
// WRAPPER is the script's own path; the Python client it stands in for is WRAPPER-py (`optcc-py`).
//
// - optcc's own commands, server control and compiler identification (`--version`: its server is started
//   ahead): exec the Python client, unchanged.
// - No `-c` and no OPTCC_CAPTURE (links, `-E`): exec clang as spawn.hand_over does (OPTCC_CLANG /
//   OPTCC_CLANGXX, default clang-19 / clang++-19, looked up on PATH).
// - `-c` or capture: find this user's server for this install as resident_link.py does (the same folder,
//   the same install key: the package version, and a CRC-32 of the interpreter's path and of every .py
//   source in clients/, computed here on each run), send it resident_wire.py's `run` frame with descriptors
//   0, 1, 2 and the working folder, pass Ctrl-C and a build's SIGTERM on to the child's process group, exit
//   with the status it sends.
// Anything else (OPTCC_RESIDENT off, no private folder, no server listening, a server of another protocol
// or install, a child that ends without a status) and the Python client is exec'd with the same arguments:
// the command then runs exactly as without this program (the Python client starts a server if none
// listens; outputs are written atomically, so a unit rerun after a dead child is safe).
//
// Built by clients/native_client.py with the wrapped clang, which passes the install's facts:
//   OPTCC_VERSION (optserve.__version__), OPTCC_PYTHON (the interpreter's sys.executable), OPTCC_CLIENTS
//   (the clients/ folder of the install).
// `optcc-client --key` prints the install key it computes (the build checks it against Python's).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

// The wire protocol's version, resident_wire.MAGIC (tests/clients/test_clients_native.py checks they agree;
// a server of another protocol answers F, or closes, and this client hands over to Python).
#define MAGIC "optcc-resident-1"
#define SOCKET_PATH_MAX 107
#define MAX_FRAME_BYTES (16u << 20)

#ifndef OPTCC_VERSION
#error "OPTCC_VERSION, OPTCC_PYTHON and OPTCC_CLIENTS are defined by clients/native_client.py"
#endif

extern char **environ;

static char *python_client;  // WRAPPER-py
static char **arguments;     // the command's arguments (after WRAPPER)
static int argument_count;

// Become the Python client with the same arguments: the command runs exactly as it would without this
// program. Only if that cannot be exec'd is there an error.
static void fall_back(void) {
  char **argv = calloc((size_t)argument_count + 2, sizeof(char *));
  if (argv != NULL) {
    argv[0] = python_client;
    memcpy(argv + 1, arguments, (size_t)argument_count * sizeof(char *));
    execv(python_client, argv);
  }
  fprintf(stderr, "optcc: cannot run %s: %s\n", python_client, strerror(errno));
  _exit(127);
}

static int is_one_of(const char *text, const char *const *list) {
  for (; *list != NULL; list++)
    if (strcmp(text, *list) == 0)
      return 1;
  return 0;
}

// ---- the install key: resident_wire.install_key() ----

// Slicing-by-8 (eight bytes a step): the key is computed on every run, over all of clients/*.py (~230 KB),
// and the byte-at-a-time loop was ~40% of this program's CPU.
static uint32_t crc_table[8][256];

static void crc_init(void) {
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[0][n] = c;
  }
  for (int t = 1; t < 8; t++)
    for (uint32_t n = 0; n < 256; n++)
      crc_table[t][n] = (crc_table[t - 1][n] >> 8) ^ crc_table[0][crc_table[t - 1][n] & 0xFF];
}

static uint32_t little_endian32(const unsigned char *data) {
  return (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
}

// zlib.crc32(data, crc)
static uint32_t crc32_update(uint32_t crc, const unsigned char *data, size_t size) {
  crc = ~crc;
  for (; size >= 8; data += 8, size -= 8) {
    uint32_t low = little_endian32(data) ^ crc, high = little_endian32(data + 4);
    crc = crc_table[7][low & 0xFF] ^ crc_table[6][(low >> 8) & 0xFF] ^ crc_table[5][(low >> 16) & 0xFF] ^
          crc_table[4][low >> 24] ^ crc_table[3][high & 0xFF] ^ crc_table[2][(high >> 8) & 0xFF] ^
          crc_table[1][(high >> 16) & 0xFF] ^ crc_table[0][high >> 24];
  }
  for (; size > 0; data++, size--)
    crc = crc_table[0][(crc ^ *data) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

static int by_bytes(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);  // Python's sorted() of the names: code point order
}

static int python_source(const struct dirent *entry) {
  size_t length = strlen(entry->d_name);
  return length >= 3 && strcmp(entry->d_name + length - 3, ".py") == 0;
}

// `<version>-<crc32 of the interpreter's path and every clients/*.py, name NUL source>`; 0 on success.
static int install_key(char *key, size_t size) {
  crc_init();
  uint32_t crc = crc32_update(0, (const unsigned char *)OPTCC_PYTHON, strlen(OPTCC_PYTHON));
  struct dirent **names;
  int count = scandir(OPTCC_CLIENTS, &names, python_source, by_bytes);
  if (count < 0)
    return -1;
  int failed = 0;
  static unsigned char buffer[1 << 16];
  for (int i = 0; i < count; i++) {
    if (!failed) {
      char path[4096];
      int fd = -1;
      if (snprintf(path, sizeof path, "%s/%s", OPTCC_CLIENTS, names[i]->d_name) < (int)sizeof path)
        fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        failed = 1;
      } else {
        crc = crc32_update(crc, (const unsigned char *)names[i]->d_name, strlen(names[i]->d_name) + 1);
        ssize_t got;
        while ((got = read(fd, buffer, sizeof buffer)) > 0)
          crc = crc32_update(crc, buffer, (size_t)got);
        failed = got < 0;
        close(fd);
      }
    }
    free(names[i]);
  }
  free(names);
  if (failed)
    return -1;
  return snprintf(key, size, "%s-%08x", OPTCC_VERSION, crc) < (int)size ? 0 : -1;
}

// ---- settings.ResidentSettings, as far as a served command needs them ----

static int copy_stripped_lower(const char *value, char *out, size_t size) {
  while (*value == ' ' || (*value >= '\t' && *value <= '\r'))
    value++;
  size_t length = strlen(value);
  while (length > 0 && (value[length - 1] == ' ' || (value[length - 1] >= '\t' && value[length - 1] <= '\r')))
    length--;
  if (length >= size)
    return -1;
  for (size_t i = 0; i < length; i++) {
    unsigned char c = (unsigned char)value[i];
    if (c >= 0x80)
      return -1;  // Python's strip() and lower() know more than ASCII: let it decide
    out[i] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
  }
  out[length] = '\0';
  return 0;
}

// 1: the resident server is on (OPTCC_RESIDENT; off by default under pytest); 0: off; -1: unsure.
static int resident_enabled(void) {
  const char *value = getenv("OPTCC_RESIDENT");
  if (value == NULL) {
    const char *pytest = getenv("PYTEST_CURRENT_TEST");
    value = (pytest != NULL && *pytest != '\0') ? "0" : "1";
  }
  char word[16];
  if (copy_stripped_lower(value, word, sizeof word) != 0)
    return -1;
  static const char *const off[] = {"0", "false", "no", "off", NULL};
  return !is_one_of(word, off);
}

// OPTCC_RESIDENT_IDLE, when set, must be a positive number (else Python says why): only plain decimal
// numbers are judged here.
static int idle_valid(void) {
  const char *value = getenv("OPTCC_RESIDENT_IDLE");
  if (value == NULL)
    return 1;
  for (const char *c = value; *c != '\0'; c++)
    if (strchr("0123456789.eE+- \t\n", *c) == NULL)
      return 0;
  char *end;
  double seconds = strtod(value, &end);
  while (*end == ' ' || *end == '\t' || *end == '\n')
    end++;
  return end != value && *end == '\0' && seconds > 0;
}

static int nonempty(const char *value) { return value != NULL && *value != '\0'; }

// The resident folder (OPTCC_RESIDENT_DIR, else $XDG_RUNTIME_DIR/optserve, else ~/.cache/optserve/run),
// only if it exists and is private: a real folder of this user that no one else may enter. 0 on success.
static int resident_folder(char *folder, size_t size) {
  const char *named = getenv("OPTCC_RESIDENT_DIR"), *runtime = getenv("XDG_RUNTIME_DIR");
  const char *home = getenv("HOME");
  int written;
  if (nonempty(named))
    written = snprintf(folder, size, "%s", named);
  else if (nonempty(runtime))
    written = snprintf(folder, size, "%s%soptserve", runtime,
                       runtime[strlen(runtime) - 1] == '/' ? "" : "/");
  else if (nonempty(home))
    written = snprintf(folder, size, "%s%s.cache/optserve/run", home, home[strlen(home) - 1] == '/' ? "" : "/");
  else
    return -1;
  if (written < 0 || (size_t)written >= size)
    return -1;
  struct stat info;
  if (lstat(folder, &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != getuid() || (info.st_mode & 077))
    return -1;  // missing (Python creates it) or not private (Python says why)
  return 0;
}

// ---- the link: resident_link._connect and _run ----

static int connect_server(const char *path) {
  int connection = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connection < 0)
    return -1;
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  memcpy(address.sun_path, path, strlen(path) + 1);
  struct ucred peer;
  socklen_t length = sizeof peer;
  if (connect(connection, (struct sockaddr *)&address, sizeof address) == 0 &&
      getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0 && peer.uid == getuid())
    return connection;
  close(connection);
  return -1;
}

struct frame {
  char *data;
  size_t size, capacity;
};

static int append(struct frame *frame, const char *field, size_t length) {
  if (frame->size + length + 1 > frame->capacity) {
    size_t capacity = (frame->size + length + 1) * 2;
    char *data = realloc(frame->data, capacity);
    if (data == NULL)
      return -1;
    frame->data = data;
    frame->capacity = capacity;
  }
  if (frame->size > 4)
    frame->data[frame->size++] = '\0';  // fields are joined by NUL
  memcpy(frame->data + frame->size, field, length);
  frame->size += length;
  return 0;
}

static int append_text(struct frame *frame, const char *field) { return append(frame, field, strlen(field)); }

static int append_number(struct frame *frame, long long number) {
  char text[32];
  snprintf(text, sizeof text, "%lld", number);
  return append_text(frame, text);
}

// The `run` frame: MAGIC, key, run, driver, argv[0], start time, process group, umask, niceness, the
// number of arguments, the arguments, the environment's NAME=value items.
static int run_frame(struct frame *frame, const char *key, const char *driver, double started) {
  frame->capacity = 1 << 14;
  frame->data = malloc(frame->capacity);
  if (frame->data == NULL)
    return -1;
  frame->size = 4;
  mode_t mask = umask(022);
  umask(mask);
  errno = 0;
  int niceness = getpriority(PRIO_PROCESS, 0);
  if (niceness == -1 && errno != 0)
    return -1;
  char start[64];
  snprintf(start, sizeof start, "%.9f", started);
  if (append_text(frame, MAGIC) || append_text(frame, key) || append_text(frame, "run") ||
      append_text(frame, driver) || append_text(frame, python_client) || append_text(frame, start) ||
      append_number(frame, getpgrp()) || append_number(frame, mask) || append_number(frame, niceness) ||
      append_number(frame, argument_count))
    return -1;
  for (int i = 0; i < argument_count; i++)
    if (append_text(frame, arguments[i]))
      return -1;
  for (char **item = environ; *item != NULL; item++)
    if (strchr(*item + 1, '=') != NULL && append_text(frame, *item))  // as os.environb reads environ
      return -1;
  size_t body = frame->size - 4;
  if (body > MAX_FRAME_BYTES)
    return -1;
  frame->data[0] = (char)(body >> 24);
  frame->data[1] = (char)(body >> 16);
  frame->data[2] = (char)(body >> 8);
  frame->data[3] = (char)body;
  return 0;
}

// Send the frame, descriptors 0, 1, 2 and the working folder with its first bytes (SCM_RIGHTS).
static int send_frame(int connection, const struct frame *frame) {
  int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (here < 0)
    return -1;
  int fds[4] = {0, 1, 2, here};
  char control[CMSG_SPACE(sizeof fds)];
  memset(control, 0, sizeof control);
  struct iovec chunk = {.iov_base = frame->data, .iov_len = frame->size};
  struct msghdr message = {.msg_iov = &chunk, .msg_iovlen = 1, .msg_control = control,
                           .msg_controllen = sizeof control};
  struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(rights), fds, sizeof fds);
  ssize_t sent;
  do
    sent = sendmsg(connection, &message, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  close(here);
  if (sent < 0)
    return -1;
  for (size_t done = (size_t)sent; done < frame->size; done += (size_t)sent) {
    do
      sent = send(connection, frame->data + done, frame->size - done, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent <= 0)
      return -1;
  }
  return 0;
}

static volatile sig_atomic_t child_group = 0, received = 0;

static void forward(int signum) {
  received = signum;
  if (child_group > 0)
    kill(-child_group, signum);
}

// The next record (a kind byte and a big-endian signed 32-bit number); 0, or -1 at the end of the
// connection. A signal that interrupts the wait is forwarded by its handler and the wait goes on.
static int read_record(int connection, char *kind, int32_t *number) {
  unsigned char data[5];
  size_t have = 0;
  while (have < sizeof data) {
    ssize_t got = recv(connection, data + have, sizeof data - have, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return -1;
    have += (size_t)got;
  }
  *kind = (char)data[0];
  *number = (int32_t)((uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 | data[4]);
  return 0;
}

static int served(const char *driver, double started) {
  if (resident_enabled() != 1 || !idle_valid())
    fall_back();  // off (in-process), or a setting Python must judge
  char folder[4096], key[128], path[4200];
  if (resident_folder(folder, sizeof folder) != 0 || install_key(key, sizeof key) != 0)
    fall_back();
  int length = snprintf(path, sizeof path, "%s/optcc-%s.sock", folder, key);
  if (length < 0 || length > SOCKET_PATH_MAX)
    fall_back();
  struct stat info;
  for (int fd = 0; fd < 3; fd++)
    if (fstat(fd, &info) != 0)
      fall_back();  // a closed stdio descriptor cannot be passed on
  int connection = connect_server(path);
  if (connection < 0)
    fall_back();  // nothing listening: Python starts the server
  struct frame frame = {0};
  if (run_frame(&frame, key, driver, started) != 0 || send_frame(connection, &frame) != 0)
    fall_back();
  free(frame.data);
  char kind;
  int32_t number;
  if (read_record(connection, &kind, &number) != 0 || kind != 'P')
    fall_back();  // another install's or protocol's server, or gone before it began: nothing ran
  child_group = number;
  struct sigaction action = {.sa_handler = forward};  // no SA_RESTART: recv sees EINTR, and goes on
  sigemptyset(&action.sa_mask);
  static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
    sigaction(forwarded[i], &action, NULL);
  int done = read_record(connection, &kind, &number);
  if (done != 0 && received) {  // the child died of the signal the build sent: so does this process
    int signum = received;
    signal(signum, SIG_DFL);
    kill(getpid(), signum);
    _exit(128 + signum);
  }
  if (done != 0 || kind != 'X') {
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
      signal(forwarded[i], SIG_DFL);
    fall_back();  // the child ended without a status: the unit runs again, through Python
  }
  _exit(number & 0xFF);
}

int main(int argc, char **argv) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);  // time.monotonic(): the unit's `before_s` counts from here
  double started = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
  if (argc == 2 && strcmp(argv[1], "--key") == 0) {
    char key[128];
    if (install_key(key, sizeof key) != 0)
      return 1;
    printf("%s %s\n", MAGIC, key);
    return 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: optcc-client WRAPPER [ARGUMENTS...] (the installed optcc execs it)\n");
    return 2;
  }
  size_t wrapper = strlen(argv[1]);
  python_client = malloc(wrapper + 4);
  if (python_client == NULL)
    return 127;
  memcpy(python_client, argv[1], wrapper);
  memcpy(python_client + wrapper, "-py", 4);
  arguments = argv + 2;
  argument_count = argc - 2;
  int cxx = wrapper >= 2 && strcmp(argv[1] + wrapper - 2, "++") == 0;

  // resident_client._command's decisions, in its order
  static const char *const own[] = {"--start-server", "--stop-server", "--stats", "--zero-stats",
                                    "--help",         "--build-tap",   NULL};
  static const char *const identification[] = {"--version", "-v", "-V", "-qversion", NULL};
  if (argument_count == 1 && is_one_of(arguments[0], own))
    fall_back();
  int compiles = 0;
  for (int i = 0; i < argument_count; i++) {
    if (is_one_of(arguments[i], identification))
      fall_back();  // configure or meson asking which compiler: Python starts the server ahead
    compiles |= strcmp(arguments[i], "-c") == 0;
  }
  if (compiles || nonempty(getenv("OPTCC_CAPTURE")))
    served(cxx ? "c++" : "c", started);

  // nothing compiled: clang's as given (spawn.compiler, spawn.hand_over)
  const char *compiler = getenv(cxx ? "OPTCC_CLANGXX" : "OPTCC_CLANG");
  if (compiler == NULL)
    compiler = cxx ? "clang++-19" : "clang-19";
  if (*compiler == '\0')
    fall_back();
  char **command = calloc((size_t)argument_count + 2, sizeof(char *));
  if (command == NULL)
    fall_back();
  command[0] = (char *)compiler;
  memcpy(command + 1, arguments, (size_t)argument_count * sizeof(char *));
  execvp(compiler, command);
  fall_back();  // Python says why it cannot run it, and exits 127 as it would
}
