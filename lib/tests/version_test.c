// SPDX-License-Identifier: GPL-2.0
/*
 * The one version: VERSION at the top of the tree (given by tests/run.sh
 * as KNITK_VERSION) is what knitk_version() returns and what the header's
 * KNITK_VERSION_MAJOR/MINOR/PATCH spell.
 */
#include <stdio.h>
#include <string.h>

#include "knitk.h"
#include "tap.h"

static const char *want(void)
{
	return getenv("KNITK_VERSION");
}

static void library_is_VERSION(void)
{
	const char *v = knitk_version();

	REQUIRE(want());
	REQUIRE(v);
	printf("# knitk_version() = \"%s\", VERSION = \"%s\"\n", v, want());
	CHECK(strcmp(v, want()) == 0);
}

static void header_macros_are_VERSION(void)
{
	char hdr[64];

	REQUIRE(want());
	snprintf(hdr, sizeof(hdr), "%d.%d.%d", KNITK_VERSION_MAJOR,
		 KNITK_VERSION_MINOR, KNITK_VERSION_PATCH);
	printf("# header %s, VERSION %s\n", hdr, want());
	CHECK(strcmp(hdr, want()) == 0);
}

int main(void)
{
	TEST(library_is_VERSION);
	TEST(header_macros_are_VERSION);
	return tap_exit();
}
