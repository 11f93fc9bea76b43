# The `build` workload's Makefile: lua5.4's whole source (SRC, from its Debian source package) built as Lua's
# own upstream Makefile builds it for Linux, written here because Debian's copy adds libtool and C++ rebuilds
# for the package. Run from an empty scratch folder: objects and programs land there, SRC is only read.
#   make -j2 -f lua_build.mk SRC=/path/to/lua5.4/src [EXTRA_CFLAGS=-I...] [OBJECTS...]
SRC ?= $(error SRC must name lua5.4's src folder)
VPATH = $(SRC)
CC = gcc -std=gnu99
CFLAGS = -O2 -Wall -Wextra -DLUA_COMPAT_5_3 -DLUA_USE_LINUX -frandom-seed=heapcost $(EXTRA_CFLAGS)

CORE_O = lapi.o lcode.o lctype.o ldebug.o ldo.o ldump.o lfunc.o lgc.o llex.o lmem.o lobject.o lopcodes.o \
         lparser.o lstate.o lstring.o ltable.o ltm.o lundump.o lvm.o lzio.o
LIB_O = lauxlib.o lbaselib.o lcorolib.o ldblib.o liolib.o lmathlib.o loadlib.o loslib.o lstrlib.o ltablib.o \
        lutf8lib.o linit.o

all: liblua.a lua luac

liblua.a: $(CORE_O) $(LIB_O)
	ar rcD $@ $^

lua: lua.o liblua.a
	$(CC) -o $@ lua.o liblua.a -lm -Wl,-E -ldl

luac: luac.o liblua.a
	$(CC) -o $@ luac.o liblua.a -lm

%.o: %.c
	$(CC) $(CFLAGS) -c $< -o $@

.PHONY: all
