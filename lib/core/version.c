// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The library's version, VERSION at the top of the tree (lib/Makefile). */
#include "internal.h"

KNITK_EXPORT const char *knitk_version(void)
{
	return KNITK_LIB_VERSION;
}
