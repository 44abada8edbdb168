# SPDX-License-Identifier: GPL-2.0
#
# knitk: kernel-assisted shared-memory IPC.
#
#   make            library, tools, module and selftests
#   make demo       boot a VM, modprobe knitk, run the example pool
#   make check      every test layer; ends with "N passed, M failed"
#   make stress     the kselftests under a KASAN + lockdep + kmemleak kernel
#   make deps       install the Debian packages the above need

KVER	?= $(shell tools/kver.sh 2>/dev/null)
KDIR	?= /lib/modules/$(KVER)/build

.PHONY: all lib tools module selftests check vm-check kunit stress demo deps clean install

all: lib tools module selftests

lib:
	$(MAKE) -C lib

tools: lib
	$(MAKE) -C tools

module:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

selftests: lib
	$(MAKE) -C selftests/knitk

check:
	tools/check.sh

vm-check:
	CHECK_STEPS=vm tools/check.sh

kunit:
	CHECK_STEPS=kunit tools/check.sh

stress:
	tools/vm-debug.sh

demo:
	tools/demo.sh

deps:
	tools/deps.sh

install: lib
	$(MAKE) -C lib install

clean:
	$(MAKE) -C lib clean
	$(MAKE) -C tools clean
	$(MAKE) -C selftests/knitk clean
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	rm -rf build
