# SPDX-License-Identifier: GPL-2.0
#
# knitk: kernel-assisted shared-memory IPC.
#
#   make            library, tools, module and selftests
#   make demo       boot a VM, modprobe knitk, run the example pool
#   make check      every test layer; ends with "N passed, M failed"
#   make stress     1000-kill storms on the futex backend, then every
#                   kselftest (1000-kill storm, 200,000-op fuzz over several
#                   seeds) under a KASAN + lockdep + kmemleak guest kernel;
#                   ends with "N passed, M failed"
#   make deps       install the Debian packages the above need
#   make install    library, headers, knitk.pc, knitk-bench, man pages, udev
#                   rule (PREFIX=/usr/local, DESTDIR, LIBDIR, ...: below)
#   make uninstall  removes exactly what make install put there

# The kernel to build the module for: KDIR, else /lib/modules/$(KVER)/build,
# else the one tools/kver.sh --build picks (the running kernel, or Debian's
# 6.1 image the VM boots); its message names what to install when neither
# has headers.  Resolved in the recipes, so targets without the module never
# look for a kernel.
KVER	?=
KDIR	?=
kdir	= $(or $(KDIR),$(if $(KVER),/lib/modules/$(KVER)/build))
kdir_sh	= kdir='$(kdir)'; [ -n "$$kdir" ] || { kver=$$(tools/kver.sh --build) && \
	  kdir=/lib/modules/$$kver/build; } || exit 1

# Install directories; LIBDIR is multiarch (e.g. lib/x86_64-linux-gnu).
PREFIX		?= /usr/local
MULTIARCH	:= $(or $(shell $(CC) -print-multiarch 2>/dev/null),\
		   $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null))
LIBDIR		?= $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
INCDIR		?= $(PREFIX)/include
BINDIR		?= $(PREFIX)/bin
MANDIR		?= $(PREFIX)/share/man
DOCDIR		?= $(PREFIX)/share/doc/knitk
UDEVRULESDIR	?= $(PREFIX)/lib/udev/rules.d
INSTALL_VARS	= DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' LIBDIR='$(LIBDIR)' \
		  INCDIR='$(INCDIR)' BINDIR='$(BINDIR)' MANDIR='$(MANDIR)' \
		  DOCDIR='$(DOCDIR)' UDEVRULESDIR='$(UDEVRULESDIR)'

.PHONY: all lib tools module selftests check vm-check kunit stress demo deps clean \
	install uninstall

all: lib tools module selftests

lib:
	$(MAKE) -C lib

tools: lib
	$(MAKE) -C tools

module:
	+@$(kdir_sh); echo "make module: building for $$kdir"; \
	$(MAKE) -C "$$kdir" M=$(CURDIR) modules

selftests: lib
	$(MAKE) -C selftests/knitk

check:
	tools/check.sh

vm-check:
	CHECK_STEPS=vm tools/check.sh

kunit:
	CHECK_STEPS=kunit tools/check.sh

stress:
	CHECK_STEPS="stress-host vm-debug" CHECK_LOG_DIR=build/stress tools/check.sh

demo:
	tools/demo.sh

deps:
	tools/deps.sh

install: lib
	$(MAKE) -C tools knitk-bench
	$(INSTALL_VARS) tools/install.sh install

uninstall:
	$(INSTALL_VARS) tools/install.sh uninstall

clean:
	$(MAKE) -C lib clean
	$(MAKE) -C tools clean
	$(MAKE) -C selftests/knitk clean
	+-@$(kdir_sh); $(MAKE) -C "$$kdir" M=$(CURDIR) clean
	rm -rf build
