// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: knot memory - allocation, kernel mapping, mmap, lifetime, debugfs.
 *
 * A knot's pages are allocated one by one with GFP_KERNEL_ACCOUNT so they
 * are charged to the memcg of the process that created it, and vmap'd so
 * the kernel can read mailbox words and write doorbell seqs.  They are
 * pinned and in no process's RSS, so, as io_uring does for its rings, they
 * are also charged to the creating user's locked_vm against its
 * RLIMIT_MEMLOCK (unless it has CAP_IPC_LOCK) until the knot is freed.  The knot
 * holds one reference per attached endpoint; a mapping holds its file and
 * so its endpoint, so the memory outlives every mapping of it.
 *
 * A knot of KNITK_HUGE_MIN_BYTES or more (without KNITK_GEOM_NO_HUGE, and
 * while the huge_chunks parameter is on) takes its pages a PMD-sized,
 * physically contiguous chunk at a time where the allocator has one at
 * hand, one page at a time where not.  Each chunk is split into order-0
 * pages at once, so everything after the allocation (the pages[] array,
 * the vmap, the mapping, the fault handler, the memcg and locked_vm
 * charges, the free) sees the same single pages as before.  The mapping
 * stays one of 4 KiB entries: a PMD entry would need a compound page
 * mapped through the page cache's rmap, or VM_PFNMAP (vmf_insert_pfn_pmd),
 * which takes the knot's struct pages out of get_user_pages and so out of
 * futexes, O_DIRECT and io_uring buffers on it.  What the chunks buy is
 * locality: a 2 MiB range of the knot is 2 MiB of physical memory (fewer
 * DRAM pages and cache-set conflicts, TLB coalescing where the CPU does
 * it), not fewer TLB entries.
 */
#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/overflow.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "knitk_internal.h"
#include "knitk_trace.h"

bool knitk_huge_chunks = true;
module_param_named(huge_chunks, knitk_huge_chunks, bool, 0644);
MODULE_PARM_DESC(huge_chunks,
		 "allocate knots of 2 MiB or more in physically contiguous PMD-sized chunks where free (default 1)");

static struct dentry *knitk_debugfs_root;
static atomic64_t knitk_knot_ids = ATOMIC64_INIT(0);
/* Knots not yet freed and their bytes: debugfs knitk/live, for leak tests. */
static atomic64_t knitk_live_knots = ATOMIC64_INIT(0);
static atomic64_t knitk_live_bytes = ATOMIC64_INIT(0);

static int knitk_knot_show(struct seq_file *m, void *unused)
{
	struct knitk_knot *knot = m->private;
	unsigned int d, c;
	u64 live, dead;

	seq_printf(m, "knot %llu size %llu workers %u submitters %u steal %u region %u huge %llu\n",
		   knot->id, knot->layout.size, knot->geometry.nr_workers,
		   knot->geometry.nr_submitters,
		   !!(knot->geometry.flags & KNITK_GEOM_STEAL),
		   knot->geometry.region_lanes, knot->control->huge_bytes);
	seq_printf(m, "live %#llx dead %#llx death_seq %u\n",
		   READ_ONCE(knot->control->live),
		   READ_ONCE(knot->control->dead),
		   READ_ONCE(knot->control->death_seq));
	/* Every slot joined so far: its owner's pid (initial namespace). */
	seq_puts(m, "role slot pid generation state\n");
	mutex_lock(&knot->lock);
	live = READ_ONCE(knot->control->live);
	dead = READ_ONCE(knot->control->dead);
	for (d = 0; d < KNITK_ROLE_SLOTS; d++) {
		if (!knot->pids[d])
			continue;
		seq_printf(m, "%s %u %d %u %s\n",
			   d == KNITK_DOORBELL_HOST ? "host" : "worker", d,
			   knot->pids[d], READ_ONCE(knot->control->generation[d]),
			   live & BIT_ULL(d) ? "alive" :
			   dead & BIT_ULL(d) ? "dead" : "left");
	}
	mutex_unlock(&knot->lock);
	seq_puts(m, "doorbell");
	for (c = 0; c < KNITK_NR_BELL_COUNTERS; c++)
		seq_printf(m, " %s", knitk_bell_fields[c].name);
	seq_putc(m, '\n');
	for (d = 0; d < KNITK_NR_DOORBELLS; d++) {
		const atomic64_t *v = knot->bells[d].counters;

		if (!knitk_doorbell_valid(&knot->geometry, d))
			continue;
		seq_printf(m, "%u", d);
		for (c = 0; c < KNITK_NR_BELL_COUNTERS; c++)
			seq_printf(m, " %llu", (u64)atomic64_read(&v[c]));
		seq_putc(m, '\n');
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(knitk_knot);

static int knitk_live_show(struct seq_file *m, void *unused)
{
	seq_printf(m, "knots %lld\nbytes %lld\n",
		   (s64)atomic64_read(&knitk_live_knots),
		   (s64)atomic64_read(&knitk_live_bytes));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(knitk_live);

/*
 * debugfs is root's: every file is 0400, so another user learns nothing of
 * a knot (its size, roles or counters) from it.
 */
void knitk_knot_debugfs_init(void)
{
	knitk_debugfs_root = debugfs_create_dir("knitk", NULL);
	debugfs_create_file("live", 0400, knitk_debugfs_root, NULL,
			    &knitk_live_fops);
	knitk_hooks_init(knitk_debugfs_root);
}

void knitk_knot_debugfs_exit(void)
{
	debugfs_remove(knitk_debugfs_root);
}

static void knitk_knot_free_pages(struct knitk_knot *knot)
{
	unsigned long i;

	for (i = 0; i < knot->nr_pages; i++)
		if (knot->pages[i])
			__free_page(knot->pages[i]);
	kvfree(knot->pages);
}

/*
 * Fill pages[@i, @i + KNITK_CHUNK_PAGES) of @knot from one physically
 * contiguous block, or return false.  Quietly and without reclaim or
 * compaction retries (NORETRY): a block not at hand is a chunk of single
 * pages instead.  Not compound: split_page() makes it order-0 pages, each
 * with its own reference and its own share of the memcg charge, freed one
 * by one like any other page of a knot.
 */
static bool knitk_knot_alloc_chunk(struct knitk_knot *knot, unsigned long i)
{
	struct page *page;
	unsigned long j;

	page = alloc_pages(GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NORETRY |
			   __GFP_NOWARN, KNITK_CHUNK_ORDER);
	if (!page)
		return false;
	split_page(page, KNITK_CHUNK_ORDER);
	for (j = 0; j < KNITK_CHUNK_PAGES; j++)
		knot->pages[i + j] = nth_page(page, j);
	return true;
}

/* The knot is one to allocate in chunks (see the top of the file). */
static bool knitk_knot_wants_chunks(const struct knitk_knot *knot)
{
	return READ_ONCE(knitk_huge_chunks) &&
	       !(knot->geometry.flags & KNITK_GEOM_NO_HUGE) &&
	       knot->layout.size >= KNITK_HUGE_MIN_BYTES &&
	       knot->nr_pages >= KNITK_CHUNK_PAGES;
}

/*
 * Allocate every page of @knot, in chunks where it can; *@huge_bytes
 * gets the bytes allocated in chunks.  0, -ENOMEM or -EINTR (a fatal
 * signal); on failure the pages allocated so far stay in pages[] for
 * knitk_knot_free_pages().
 */
static int knitk_knot_alloc_pages(struct knitk_knot *knot, u64 *huge_bytes)
{
	bool chunks = knitk_knot_wants_chunks(knot);
	unsigned long i = 0;

	*huge_bytes = 0;
	while (i < knot->nr_pages) {
		if (chunks && !(i % KNITK_CHUNK_PAGES) &&
		    knot->nr_pages - i >= KNITK_CHUNK_PAGES &&
		    knitk_knot_alloc_chunk(knot, i)) {
			i += KNITK_CHUNK_PAGES;
			*huge_bytes += KNITK_CHUNK_PAGES << PAGE_SHIFT;
		} else {
			/*
			 * NORETRY: a knot that does not fit the creator's
			 * memcg (or the machine) fails CREATE with -ENOMEM
			 * instead of waking the OOM killer.
			 */
			knot->pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO |
						    __GFP_NORETRY | __GFP_NOWARN);
			if (!knot->pages[i])
				return -ENOMEM;
			i++;
		}
		/* A large knot takes a while: let a killed creator go. */
		if (fatal_signal_pending(current))
			return -EINTR;
		cond_resched();
	}
	return 0;
}

/*
 * Charge @knot's pages to the current user's locked_vm, or refuse with
 * -ENOMEM past RLIMIT_MEMLOCK; CAP_IPC_LOCK is not charged.
 */
static int knitk_knot_charge(struct knitk_knot *knot)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct user_struct *user;
	unsigned long cur, next;

	if (ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK))
		return 0;
	user = get_uid(current_user());
	cur = atomic_long_read(&user->locked_vm);
	do {
		if (check_add_overflow(cur, knot->nr_pages, &next) ||
		    next > limit) {
			free_uid(user);
			return -ENOMEM;
		}
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, next));
	knot->user = user;
	return 0;
}

static void knitk_knot_uncharge(struct knitk_knot *knot)
{
	if (!knot->user)
		return;
	atomic_long_sub(knot->nr_pages, &knot->user->locked_vm);
	free_uid(knot->user);
}

/**
 * knitk_knot_create() - allocate a knot and fill its control page
 * @g: a validated geometry
 * @l: its layout
 *
 * Return: the knot with one reference, or an ERR_PTR.
 */
struct knitk_knot *knitk_knot_create(const struct knitk_geometry *g,
				     const struct knitk_layout *l)
{
	struct knitk_control *ctl;
	struct knitk_knot *knot;
	unsigned long i;
	u64 huge_bytes;
	char name[32];
	int err = -ENOMEM;

	BUILD_BUG_ON(PAGE_SIZE != KNITK_PAGE_BYTES);
	BUILD_BUG_ON(sizeof(struct knitk_control) > KNITK_PAGE_BYTES);
	BUILD_BUG_ON(sizeof(struct knitk_doorbell) != KNITK_CACHELINE);
	BUILD_BUG_ON(sizeof(struct knitk_steal_line) != KNITK_CACHELINE);

	knot = kzalloc(sizeof(*knot), GFP_KERNEL_ACCOUNT);
	if (!knot)
		return ERR_PTR(-ENOMEM);
	kref_init(&knot->ref);
	mutex_init(&knot->lock);
	init_waitqueue_head(&knot->pollers);
	knitk_words_init(knot);
	for (i = 0; i < KNITK_NR_DOORBELLS; i++)
		knitk_bell_init(&knot->bells[i]);
	knot->geometry = *g;
	knot->layout = *l;
	knot->nr_pages = l->size >> PAGE_SHIFT;
	/* Larger than memory (max_knot_bytes raised): it cannot fit. */
	if (knot->nr_pages > totalram_pages())
		goto err_knot;
	err = knitk_knot_charge(knot);
	if (err)
		goto err_knot;
	err = -ENOMEM;
	/*
	 * Quietly, and without the OOM killer: the array of a knot near the
	 * size of memory is large, and past INT_MAX bytes kvmalloc warns.
	 */
	knot->pages = kvcalloc(knot->nr_pages, sizeof(*knot->pages),
			       GFP_KERNEL_ACCOUNT | __GFP_NORETRY |
			       __GFP_NOWARN);
	if (!knot->pages)
		goto err_charge;
	err = knitk_knot_alloc_pages(knot, &huge_bytes);
	if (err)
		goto err_pages;
	err = -ENOMEM;
	knot->base = vmap(knot->pages, knot->nr_pages, VM_MAP, PAGE_KERNEL);
	if (!knot->base)
		goto err_pages;

	/* Nobody else sees the knot yet: plain stores are enough here. */
	ctl = knot->base;
	ctl->magic = KNITK_MAGIC;
	ctl->api = KNITK_API;
	ctl->geometry = *g;
	ctl->layout = *l;
	ctl->huge_bytes = huge_bytes;
	knot->control = ctl;
	knitk_hook_counters(knot);

	atomic64_inc(&knitk_live_knots);
	atomic64_add(l->size, &knitk_live_bytes);
	knot->id = atomic64_inc_return(&knitk_knot_ids);
	snprintf(name, sizeof(name), "knot-%llu", knot->id);
	knot->debugfs = debugfs_create_file(name, 0400, knitk_debugfs_root,
					    knot, &knitk_knot_fops);
	trace_knitk_knot_create(knot);
	return knot;

err_pages:
	knitk_knot_free_pages(knot);
err_charge:
	knitk_knot_uncharge(knot);
err_knot:
	kfree(knot);
	return ERR_PTR(err);
}

void knitk_knot_get(struct knitk_knot *knot)
{
	kref_get(&knot->ref);
}

static void knitk_knot_free(struct kref *ref)
{
	struct knitk_knot *knot = container_of(ref, struct knitk_knot, ref);
	unsigned int i;

	trace_knitk_knot_destroy(knot);
	/* Waits for any reader of the file before the knot goes away. */
	debugfs_remove(knot->debugfs);
	/* No endpoint is left, so no wait or notify uses a bell any more. */
	for (i = 0; i < KNITK_NR_DOORBELLS; i++)
		knitk_bell_destroy(&knot->bells[i]);
	vunmap(knot->base);
	knitk_knot_free_pages(knot);
	knitk_knot_uncharge(knot);
	atomic64_sub(knot->layout.size, &knitk_live_bytes);
	atomic64_dec(&knitk_live_knots);
	mutex_destroy(&knot->lock);
	kfree(knot);
}

void knitk_knot_put(struct knitk_knot *knot)
{
	kref_put(&knot->ref, knitk_knot_free);
}

/*
 * 6.3 made vma->vm_flags read-only and added helpers to change it; Kbuild
 * defines KNITK_HAVE_VM_FLAGS_MOD when the kernel has them.
 */
static void knitk_vma_set_flags(struct vm_area_struct *vma, unsigned long set,
				unsigned long clear)
{
#ifdef KNITK_HAVE_VM_FLAGS_MOD
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

/*
 * Pages are inserted at mmap time; this puts one back after userspace
 * dropped it (MADV_DONTNEED), so the mapping always shows the knot.
 */
static vm_fault_t knitk_knot_fault(struct vm_fault *vmf)
{
	struct knitk_knot *knot = vmf->vma->vm_private_data;
	struct page *page;

	if (vmf->pgoff >= knot->nr_pages)
		return VM_FAULT_SIGBUS;
	page = knot->pages[vmf->pgoff];
	get_page(page);
	vmf->page = page;
	return 0;
}

static const struct vm_operations_struct knitk_knot_vm_ops = {
	.fault = knitk_knot_fault,
};

/**
 * knitk_knot_mmap() - map the control page or the data region of a knot
 * @knot: the knot
 * @vma: the new mapping
 *
 * Only two mappings exist: the whole control page read-only, or the whole
 * data region read-write; both MAP_SHARED and fixed in size.
 *
 * Return: 0, -EINVAL for any other mapping, -EPERM for a writable control
 * page, or the error of inserting the pages.
 */
int knitk_knot_mmap(struct knitk_knot *knot, struct vm_area_struct *vma)
{
	const struct knitk_layout *l = &knot->layout;
	unsigned long len = vma->vm_end - vma->vm_start;
	unsigned long first = vma->vm_pgoff;
	unsigned long clear = 0;
	unsigned long num;

	/* VM_MAYSHARE: VM_SHARED is dropped for a read-only fd. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (first == 0 && len == l->control_size) {
		if (vma->vm_flags & VM_WRITE)
			return -EPERM;
		/* So mprotect() cannot make it writable later. */
		clear = VM_MAYWRITE;
	} else if (first != l->control_size >> PAGE_SHIFT ||
		   len != l->size - l->control_size) {
		return -EINVAL;
	}
	/*
	 * VM_DONTCOPY: a forked child does not inherit the mapping (unless
	 * asked with MADV_DOFORK), so one that holds no endpoint of its own
	 * cannot write a knot whose roles may have been taken over since, nor
	 * keep its memory pinned after every endpoint is gone.
	 */
	knitk_vma_set_flags(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_MIXEDMAP |
			    VM_DONTCOPY, clear);
	/* The vma holds the file, the file's endpoint holds the knot. */
	vma->vm_private_data = knot;
	vma->vm_ops = &knitk_knot_vm_ops;

	num = len >> PAGE_SHIFT;
	return vm_insert_pages(vma, vma->vm_start, knot->pages + first, &num);
}
