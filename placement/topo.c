/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>
#include <json-c/json.h>

#include "common/file.h"
#include "common/hex.h"
#include "placement/topo.h"

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_CLASS_VGA 0x0300
#define PCI_CLASS_3D 0x0302
#define PCI_CLASS_ETHERNET 0x0200
#define PCI_CLASS_INFINIBAND 0x0207

/*
 * No node comes near these; they bound the work a corrupt or hostile XML
 * file can cause (pairing is quadratic in GPUs times NICs).
 */
#define MAX_GPUS 1024
#define MAX_NICS 1024
#define MAX_PORTS 64

/* hwloc XML of the largest machines is a few MiB. */
#define XML_MAX_BYTES (256u << 20)

struct prox {
	enum phx_topo_prox cls;
	unsigned dist; /* NUMA distance for PHX_PROX_NUMA_DISTANCE */
	unsigned hops; /* PCI links when a bridge is common */
	hwloc_obj_t via;
};

struct pair {
	unsigned gpu, nic;
	struct prox p;
	unsigned kind_rank;
};

/* A NIC while it is built, with the hwloc object it came from. */
struct nic_build {
	struct phx_topo_nic nic;
	hwloc_obj_t pci; /* its PCI device, NULL when not on PCI */
	hwloc_obj_t osdev; /* the verbs or netdev OS device */
};

struct build {
	hwloc_topology_t topo;
	struct hwloc_distances_s *dist; /* NUMA latency matrix, or NULL */
	struct phx_node_topo *t;
	hwloc_obj_t *gpu_obj; /* PCI device of t->gpus[i] */
	struct nic_build *nics; /* sorted into t->nics at the end */
	size_t nnics, nic_cap;
	char *err;
	size_t errlen;
};

const char *phx_topo_prox_name(enum phx_topo_prox prox)
{
	static const char *const names[] = {
		[PHX_PROX_PCIE_SWITCH] = "pcie-switch",
		[PHX_PROX_HOST_BRIDGE] = "host-bridge",
		[PHX_PROX_NUMA] = "numa",
		[PHX_PROX_NUMA_DISTANCE] = "numa-distance",
		[PHX_PROX_PACKAGE] = "package",
		[PHX_PROX_SYSTEM] = "system",
		[PHX_PROX_NONE] = "none",
	};

	if ((unsigned)prox >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[prox];
}

const char *phx_nic_kind_name(enum phx_nic_kind kind)
{
	switch (kind) {
	case PHX_NIC_IB:
		return "ib";
	case PHX_NIC_ROCE:
		return "roce";
	case PHX_NIC_ETH:
		return "eth";
	}
	return "unknown";
}

const char *phx_port_state_name(enum phx_port_state state)
{
	static const char *const names[] = {
		[PHX_PORT_UNKNOWN] = "unknown", [PHX_PORT_DOWN] = "down",
		[PHX_PORT_INIT] = "init",	[PHX_PORT_ARMED] = "armed",
		[PHX_PORT_ACTIVE] = "active",	[PHX_PORT_ACTIVE_DEFER] = "active-defer",
	};

	if ((unsigned)state >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[state];
}

/* ------------------------------------------------------------ hwloc objects */

static void pci_addr(const struct hwloc_pcidev_attr_s *pci, char buf[PHX_TOPO_PCI_LEN])
{
	snprintf(buf, PHX_TOPO_PCI_LEN, "%04x:%02x:%02x.%01x", (unsigned)pci->domain & 0xffff,
		 pci->bus, pci->dev, pci->func & 0xf);
}

static int pci_cmp(const struct hwloc_pcidev_attr_s *a, const struct hwloc_pcidev_attr_s *b)
{
	if (a->domain != b->domain)
		return a->domain < b->domain ? -1 : 1;
	if (a->bus != b->bus)
		return a->bus < b->bus ? -1 : 1;
	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	if (a->func != b->func)
		return a->func < b->func ? -1 : 1;
	return 0;
}

/* The PCI device an OS device hangs from, or NULL. */
static hwloc_obj_t pci_parent(hwloc_obj_t obj)
{
	for (obj = obj->parent; obj; obj = obj->parent) {
		if (obj->type == HWLOC_OBJ_PCI_DEVICE)
			return obj;
		if (obj->type != HWLOC_OBJ_BRIDGE && obj->type != HWLOC_OBJ_OS_DEVICE)
			return NULL;
	}
	return NULL;
}

/* The CPU-side object (group, package, machine) an I/O object hangs from. */
static hwloc_obj_t cpu_side(hwloc_topology_t topo, hwloc_obj_t io)
{
	hwloc_obj_t obj = hwloc_get_non_io_ancestor_obj(topo, io);

	return obj ? obj : hwloc_get_root_obj(topo);
}

/* The one NUMA node an I/O object is local to; -1 when it spans several. */
static int io_numa(hwloc_topology_t topo, hwloc_obj_t io)
{
	hwloc_obj_t obj = cpu_side(topo, io);

	if (!obj->nodeset || hwloc_bitmap_weight(obj->nodeset) != 1)
		return -1;
	return hwloc_bitmap_first(obj->nodeset);
}

static hwloc_obj_t io_package(hwloc_topology_t topo, hwloc_obj_t io)
{
	hwloc_obj_t obj;

	for (obj = cpu_side(topo, io); obj; obj = obj->parent) {
		if (obj->type == HWLOC_OBJ_PACKAGE)
			return obj;
	}
	return NULL;
}

static unsigned height(hwloc_obj_t obj)
{
	unsigned h = 0;

	while ((obj = obj->parent))
		h++;
	return h;
}

/*
 * hwloc_get_common_ancestor_obj() compares depths, which I/O objects do not
 * have in the normal sense, so walk the parent links instead. *hops counts
 * the tree edges from a to b through the ancestor.
 */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b, unsigned *hops)
{
	unsigned ha = height(a), hb = height(b);

	*hops = 0;
	for (; ha > hb; ha--, (*hops)++)
		a = a->parent;
	for (; hb > ha; hb--, (*hops)++)
		b = b->parent;
	while (a != b && a && b) {
		a = a->parent;
		b = b->parent;
		*hops += 2;
	}
	return a == b ? a : NULL;
}

static char *cpulist(hwloc_const_bitmap_t set)
{
	char *list = NULL;

	if (hwloc_bitmap_list_asprintf(&list, set) < 0)
		return NULL;
	return list;
}

/* ------------------------------------------------------------ NUMA nodes */

static int numa_cmp(const void *a, const void *b)
{
	const struct phx_topo_numa *x = a, *y = b;

	return (x->os_index > y->os_index) - (x->os_index < y->os_index);
}

static int find_numas(struct build *b)
{
	struct phx_node_topo *t = b->t;
	int n = hwloc_get_nbobjs_by_type(b->topo, HWLOC_OBJ_NUMANODE);
	hwloc_obj_t obj = NULL;

	if (n <= 0)
		return 0;
	t->numas = calloc((size_t)n, sizeof(*t->numas));
	if (!t->numas)
		return -ENOMEM;
	while ((obj = hwloc_get_next_obj_by_type(b->topo, HWLOC_OBJ_NUMANODE, obj)) &&
	       t->nnumas < (size_t)n) {
		struct phx_topo_numa *numa = &t->numas[t->nnumas++];

		numa->os_index = obj->os_index;
		numa->memory = obj->attr ? obj->attr->numanode.local_memory : 0;
		numa->cpuset = obj->cpuset ? hwloc_bitmap_dup(obj->cpuset) : hwloc_bitmap_alloc();
		if (!numa->cpuset)
			return -ENOMEM;
		numa->cpulist = cpulist(numa->cpuset);
		if (!numa->cpulist)
			return -ENOMEM;
	}
	qsort(t->numas, t->nnumas, sizeof(*t->numas), numa_cmp);
	return 0;
}

/* ------------------------------------------------------------ GPUs */

static bool is_gpu(hwloc_obj_t pci)
{
	const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;

	return a->vendor_id == PCI_VENDOR_NVIDIA &&
	       (a->class_id == PCI_CLASS_VGA || a->class_id == PCI_CLASS_3D);
}

static int gpu_obj_cmp(const void *a, const void *b)
{
	hwloc_obj_t x = *(hwloc_obj_t const *)a, y = *(hwloc_obj_t const *)b;

	return pci_cmp(&x->attr->pcidev, &y->attr->pcidev);
}

static int fill_gpu(struct build *b, struct phx_topo_gpu *gpu, hwloc_obj_t pci)
{
	hwloc_obj_t near = cpu_side(b->topo, pci);

	pci_addr(&pci->attr->pcidev, gpu->pci);
	gpu->vendor_id = pci->attr->pcidev.vendor_id;
	gpu->device_id = pci->attr->pcidev.device_id;
	gpu->class_id = pci->attr->pcidev.class_id;
	gpu->numa = io_numa(b->topo, pci);
	gpu->nic = -1;
	gpu->prox = PHX_PROX_NONE;
	gpu->cpuset = near->cpuset ? hwloc_bitmap_dup(near->cpuset) : hwloc_bitmap_alloc();
	if (!gpu->cpuset)
		return -ENOMEM;
	gpu->cpulist = cpulist(gpu->cpuset);
	return gpu->cpulist ? 0 : -ENOMEM;
}

static int find_gpus(struct build *b)
{
	struct phx_node_topo *t = b->t;
	hwloc_obj_t obj = NULL;
	size_t n = 0;

	while ((obj = hwloc_get_next_pcidev(b->topo, obj)))
		n += is_gpu(obj);
	if (n == 0)
		return 0;
	if (n > MAX_GPUS) {
		snprintf(b->err, b->errlen, "the topology lists %zu GPUs; at most %d are supported",
			 n, MAX_GPUS);
		return -EINVAL;
	}
	b->gpu_obj = calloc(n, sizeof(*b->gpu_obj));
	t->gpus = calloc(n, sizeof(*t->gpus));
	if (!b->gpu_obj || !t->gpus)
		return -ENOMEM;
	while ((obj = hwloc_get_next_pcidev(b->topo, obj)) && t->ngpus < n) {
		if (is_gpu(obj))
			b->gpu_obj[t->ngpus++] = obj;
	}
	/* CUDA_DEVICE_ORDER=PCI_BUS_ID numbering, whatever order hwloc gives. */
	qsort(b->gpu_obj, t->ngpus, sizeof(*b->gpu_obj), gpu_obj_cmp);
	for (size_t i = 0; i < t->ngpus; i++) {
		t->gpus[i].index = (unsigned)i;
		if (fill_gpu(b, &t->gpus[i], b->gpu_obj[i]) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* ------------------------------------------------------------ NICs */

static struct nic_build *nic_add(struct build *b, hwloc_obj_t osdev)
{
	struct nic_build *nb;

	if (b->nnics == MAX_NICS) {
		snprintf(b->err, b->errlen, "the topology lists more than %d network devices",
			 MAX_NICS);
		return NULL;
	}
	if (b->nnics == b->nic_cap) {
		size_t cap = b->nic_cap ? 2 * b->nic_cap : 8;
		struct nic_build *grown = realloc(b->nics, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		b->nics = grown;
		b->nic_cap = cap;
	}
	nb = &b->nics[b->nnics++];
	memset(nb, 0, sizeof(*nb));
	nb->osdev = osdev;
	nb->pci = pci_parent(osdev);
	nb->nic.numa = io_numa(b->topo, nb->pci ? nb->pci : osdev);
	snprintf(nb->nic.name, sizeof(nb->nic.name), "%s", osdev->name ? osdev->name : "");
	if (nb->pci) {
		pci_addr(&nb->pci->attr->pcidev, nb->nic.pci);
		nb->nic.vendor_id = nb->pci->attr->pcidev.vendor_id;
		nb->nic.device_id = nb->pci->attr->pcidev.device_id;
	}
	return nb;
}

static struct phx_topo_port *port_get(struct phx_topo_nic *nic, unsigned num)
{
	struct phx_topo_port *ports;

	for (size_t i = 0; i < nic->nports; i++) {
		if (nic->ports[i].num == num)
			return &nic->ports[i];
	}
	if (num == 0 || num > 255 || nic->nports == MAX_PORTS)
		return NULL;
	ports = realloc(nic->ports, (nic->nports + 1) * sizeof(*ports));
	if (!ports)
		return NULL;
	nic->ports = ports;
	ports = &ports[nic->nports++];
	memset(ports, 0, sizeof(*ports));
	ports->num = num;
	ports->lid = -1;
	return ports;
}

/* Reads one "Port<N><Field>" info attribute of a verbs device. */
static void port_info(struct phx_topo_nic *nic, const char *name, const char *value)
{
	struct phx_topo_port *port;
	char *field, *end;
	unsigned long num;
	long v;

	if (strncmp(name, "Port", 4) || name[4] < '1' || name[4] > '9')
		return;
	num = strtoul(name + 4, &field, 10);
	if (strcmp(field, "State") && strcmp(field, "LID") && strcmp(field, "LinkLayer"))
		return;
	port = port_get(nic, num > 255 ? 0 : (unsigned)num);
	if (!port)
		return;
	if (!strcmp(field, "LinkLayer")) {
		snprintf(port->link_layer, sizeof(port->link_layer), "%s", value);
		return;
	}
	errno = 0;
	v = strtol(value, &end, 0);
	if (errno || end == value)
		return;
	if (!strcmp(field, "State"))
		port->state = v >= PHX_PORT_DOWN && v <= PHX_PORT_ACTIVE_DEFER
				      ? (enum phx_port_state)v
				      : PHX_PORT_UNKNOWN;
	else if (v >= 0 && v <= 0xffff)
		port->lid = v;
}

static enum phx_nic_kind rdma_kind(const struct nic_build *nb)
{
	const struct phx_topo_nic *nic = &nb->nic;

	/* The link layer says it when hwloc recorded it; else the PCI class does. */
	for (size_t i = 0; i < nic->nports; i++) {
		if (!strcmp(nic->ports[i].link_layer, "Ethernet"))
			return PHX_NIC_ROCE;
		if (!strcmp(nic->ports[i].link_layer, "InfiniBand"))
			return PHX_NIC_IB;
	}
	if (nb->pci && nb->pci->attr->pcidev.class_id == PCI_CLASS_ETHERNET)
		return PHX_NIC_ROCE;
	return PHX_NIC_IB;
}

/* Usable unless every port with a recorded state is not active. */
static bool rdma_usable(const struct phx_topo_nic *nic)
{
	bool recorded = false;

	for (size_t i = 0; i < nic->nports; i++) {
		if (nic->ports[i].state == PHX_PORT_ACTIVE ||
		    nic->ports[i].state == PHX_PORT_ACTIVE_DEFER)
			return true;
		recorded |= nic->ports[i].state != PHX_PORT_UNKNOWN;
	}
	return !recorded;
}

static int add_rdma(struct build *b, hwloc_obj_t osdev)
{
	struct nic_build *nb = nic_add(b, osdev);
	const char *guid;

	if (!nb)
		return -ENOMEM;
	nb->nic.rdma = true;
	guid = hwloc_obj_get_info_by_name(osdev, "NodeGUID");
	if (guid)
		snprintf(nb->nic.node_guid, sizeof(nb->nic.node_guid), "%s", guid);
	for (unsigned i = 0; i < osdev->infos_count; i++) {
		if (osdev->infos[i].name && osdev->infos[i].value)
			port_info(&nb->nic, osdev->infos[i].name, osdev->infos[i].value);
	}
	nb->nic.kind = rdma_kind(nb);
	nb->nic.usable = rdma_usable(&nb->nic);
	return 0;
}

static bool ipoib_address(const char *addr)
{
	/* IPoIB hardware addresses are 20 bytes: 59 characters with colons. */
	return addr && strlen(addr) == 59;
}

/*
 * A netdev on the same PCI function as a verbs device is that adapter's
 * (ib0 of mlx5_0, or the Ethernet side of a RoCE port); any other netdev
 * is an adapter of its own.
 */
static int add_netdev(struct build *b, hwloc_obj_t osdev)
{
	hwloc_obj_t pci = pci_parent(osdev);
	const char *port_s = hwloc_obj_get_info_by_name(osdev, "Port");
	unsigned long port = port_s ? strtoul(port_s, NULL, 10) : 1;
	const char *name = osdev->name ? osdev->name : "";
	bool claimed = false;
	struct nic_build *nb;

	for (size_t i = 0; pci && i < b->nnics; i++) {
		struct phx_topo_nic *nic = &b->nics[i].nic;
		struct phx_topo_port *p;

		if (b->nics[i].pci != pci || !nic->rdma)
			continue;
		claimed = true;
		if (!nic->netdev[0])
			snprintf(nic->netdev, sizeof(nic->netdev), "%s", name);
		p = port_get(nic, port > 255 ? 0 : (unsigned)port);
		if (p && !p->netdev[0])
			snprintf(p->netdev, sizeof(p->netdev), "%s", name);
	}
	if (claimed)
		return 0;
	nb = nic_add(b, osdev);
	if (!nb)
		return -ENOMEM;
	snprintf(nb->nic.netdev, sizeof(nb->nic.netdev), "%s", name);
	nb->nic.usable = true;
	if ((pci && pci->attr->pcidev.class_id == PCI_CLASS_INFINIBAND) ||
	    ipoib_address(hwloc_obj_get_info_by_name(osdev, "Address")))
		nb->nic.kind = PHX_NIC_IB;
	else
		nb->nic.kind = PHX_NIC_ETH;
	return 0;
}

static int nic_build_cmp(const void *a, const void *b)
{
	const struct nic_build *x = a, *y = b;
	int c;

	if (x->pci && y->pci) {
		c = pci_cmp(&x->pci->attr->pcidev, &y->pci->attr->pcidev);
		if (c)
			return c;
	} else if (x->pci || y->pci) {
		return x->pci ? -1 : 1;
	}
	return strcmp(x->nic.name, y->nic.name);
}

static int find_nics(struct build *b)
{
	struct phx_node_topo *t = b->t;
	hwloc_obj_t obj = NULL;

	/* Verbs devices first, so their netdevs find them. */
	while ((obj = hwloc_get_next_osdev(b->topo, obj))) {
		if (obj->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && add_rdma(b, obj) < 0)
			return -ENOMEM;
	}
	while ((obj = hwloc_get_next_osdev(b->topo, obj))) {
		if (obj->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && add_netdev(b, obj) < 0)
			return -ENOMEM;
	}
	if (b->nnics == 0)
		return 0;
	qsort(b->nics, b->nnics, sizeof(*b->nics), nic_build_cmp);
	t->nics = calloc(b->nnics, sizeof(*t->nics));
	if (!t->nics)
		return -ENOMEM;
	/* The ports move into t->nics; b->nics keeps only the hwloc objects. */
	for (size_t i = 0; i < b->nnics; i++) {
		t->nics[i] = b->nics[i].nic;
		t->nics[i].index = (unsigned)i;
		b->nics[i].nic.ports = NULL;
		b->nics[i].nic.nports = 0;
	}
	t->nnics = b->nnics;
	return 0;
}

/* ------------------------------------------------------------ pairing */

static bool numa_latency(const struct build *b, int from, int to, unsigned *dist)
{
	hwloc_obj_t x, y;
	hwloc_uint64_t xy, yx;

	if (!b->dist || from < 0 || to < 0)
		return false;
	x = hwloc_get_numanode_obj_by_os_index(b->topo, (unsigned)from);
	y = hwloc_get_numanode_obj_by_os_index(b->topo, (unsigned)to);
	if (!x || !y || hwloc_distances_obj_pair_values(b->dist, x, y, &xy, &yx) < 0)
		return false;
	/* The slower direction, should the matrix be asymmetric. */
	xy = xy > yx ? xy : yx;
	*dist = xy > UINT_MAX ? UINT_MAX : (unsigned)xy;
	return true;
}

static const struct hwloc_pcidev_attr_s *obj_pci(hwloc_obj_t obj)
{
	return obj->type == HWLOC_OBJ_BRIDGE ? &obj->attr->bridge.upstream.pci : &obj->attr->pcidev;
}

static void proximity(const struct build *b, hwloc_obj_t gpu, hwloc_obj_t nic, struct prox *p)
{
	hwloc_obj_t common, pkg;
	int gnuma, nnuma;

	memset(p, 0, sizeof(*p));
	common = common_ancestor(gpu, nic, &p->hops);
	if (common && common->type == HWLOC_OBJ_BRIDGE &&
	    common->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
		p->cls = PHX_PROX_HOST_BRIDGE;
		return;
	}
	/* A PCI bridge, or one device for both: traffic stays below the root. */
	if (common && (common->type == HWLOC_OBJ_BRIDGE || common->type == HWLOC_OBJ_PCI_DEVICE)) {
		p->cls = PHX_PROX_PCIE_SWITCH;
		p->via = common;
		return;
	}
	p->hops = 0;
	gnuma = io_numa(b->topo, gpu);
	nnuma = io_numa(b->topo, nic);
	pkg = io_package(b->topo, gpu);
	if (gnuma >= 0 && gnuma == nnuma)
		p->cls = PHX_PROX_NUMA;
	else if (numa_latency(b, gnuma, nnuma, &p->dist))
		p->cls = PHX_PROX_NUMA_DISTANCE;
	else if (pkg && pkg == io_package(b->topo, nic))
		p->cls = PHX_PROX_PACKAGE;
	else
		p->cls = PHX_PROX_SYSTEM;
}

static int pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->p.cls != y->p.cls)
		return x->p.cls < y->p.cls ? -1 : 1;
	if (x->p.dist != y->p.dist)
		return x->p.dist < y->p.dist ? -1 : 1;
	if (x->p.hops != y->p.hops)
		return x->p.hops < y->p.hops ? -1 : 1;
	/* A compute fabric is InfiniBand far more often than RoCE. */
	if (x->kind_rank != y->kind_rank)
		return x->kind_rank < y->kind_rank ? -1 : 1;
	if (x->gpu != y->gpu)
		return x->gpu < y->gpu ? -1 : 1;
	return (x->nic > y->nic) - (x->nic < y->nic);
}

/*
 * The NICs a GPU may be paired with: RDMA NICs with an active port; when
 * none has one, every RDMA NIC (the pairing still describes the hardware).
 */
static size_t candidates(const struct phx_node_topo *t, unsigned *cand)
{
	size_t n = 0;
	bool any_usable = false;

	for (size_t i = 0; i < t->nnics; i++)
		any_usable |= t->nics[i].rdma && t->nics[i].usable;
	for (size_t i = 0; i < t->nnics; i++) {
		if (t->nics[i].rdma && (t->nics[i].usable || !any_usable))
			cand[n++] = (unsigned)i;
	}
	return n;
}

static void assign(struct build *b, const struct pair *pr)
{
	struct phx_topo_gpu *gpu = &b->t->gpus[pr->gpu];

	gpu->nic = (int)pr->nic;
	gpu->prox = pr->p.cls;
	gpu->pci_hops = pr->p.cls <= PHX_PROX_HOST_BRIDGE ? pr->p.hops : 0;
	gpu->numa_distance = pr->p.cls == PHX_PROX_NUMA_DISTANCE ? pr->p.dist : 0;
	if (pr->p.via)
		pci_addr(obj_pci(pr->p.via), gpu->via);
	b->t->nics[pr->nic].ngpus++;
}

/*
 * Rounds: in each, every NIC takes at most one GPU, best pairs first, so the
 * loads differ by at most one and no NIC idles while another is shared.
 * Within a round the greedy choice on one shared order is a stable
 * matching: no GPU and NIC would both rather have each other.
 */
static int pair_gpus(struct build *b)
{
	struct phx_node_topo *t = b->t;
	unsigned *cand = NULL;
	struct pair *pairs = NULL;
	bool *taken = NULL;
	size_t ncand, npairs = 0, left = t->ngpus;
	int ret = -ENOMEM;

	if (t->ngpus == 0 || t->nnics == 0)
		return 0;
	cand = calloc(t->nnics, sizeof(*cand));
	taken = calloc(t->nnics, sizeof(*taken));
	if (!cand || !taken)
		goto out;
	ncand = candidates(t, cand);
	if (ncand == 0) {
		ret = 0;
		goto out;
	}
	pairs = calloc(t->ngpus * ncand, sizeof(*pairs));
	if (!pairs)
		goto out;
	for (unsigned g = 0; g < t->ngpus; g++) {
		for (size_t c = 0; c < ncand; c++) {
			struct pair *pr = &pairs[npairs++];
			struct nic_build *nb = &b->nics[cand[c]];

			pr->gpu = g;
			pr->nic = cand[c];
			pr->kind_rank = t->nics[cand[c]].kind == PHX_NIC_IB ? 0 : 1;
			proximity(b, b->gpu_obj[g], nb->pci ? nb->pci : nb->osdev, &pr->p);
		}
	}
	qsort(pairs, npairs, sizeof(*pairs), pair_cmp);
	while (left > 0) {
		memset(taken, 0, t->nnics * sizeof(*taken));
		for (size_t i = 0; i < npairs && left > 0; i++) {
			if (t->gpus[pairs[i].gpu].nic >= 0 || taken[pairs[i].nic])
				continue;
			assign(b, &pairs[i]);
			taken[pairs[i].nic] = true;
			left--;
		}
	}
	ret = 0;
out:
	free(pairs);
	free(taken);
	free(cand);
	return ret;
}

/* ------------------------------------------------------------ load */

static void find_latency_matrix(struct build *b)
{
	struct hwloc_distances_s *d[4];
	unsigned n = 4;

	if (hwloc_distances_get_by_type(b->topo, HWLOC_OBJ_NUMANODE, &n, d,
					HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) < 0)
		return;
	if (n > 4)
		n = 4;
	if (n > 0)
		b->dist = d[0];
	for (unsigned i = 1; i < n; i++)
		hwloc_distances_release(b->topo, d[i]);
}

static void node_facts(struct build *b)
{
	hwloc_obj_t root = hwloc_get_root_obj(b->topo);
	const char *host = root ? hwloc_obj_get_info_by_name(root, "HostName") : NULL;
	int n;

	if (host)
		snprintf(b->t->hostname, sizeof(b->t->hostname), "%s", host);
	n = hwloc_get_nbobjs_by_type(b->topo, HWLOC_OBJ_PACKAGE);
	b->t->npackages = n > 0 ? (unsigned)n : 0;
	n = hwloc_get_nbobjs_by_type(b->topo, HWLOC_OBJ_PU);
	b->t->npus = n > 0 ? (unsigned)n : 0;
}

int phx_topo_discover(hwloc_topology_t topology, struct phx_node_topo **out, char *err,
		      size_t errlen)
{
	struct build b = { .topo = topology, .err = err, .errlen = errlen };
	int ret;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	b.t = calloc(1, sizeof(*b.t));
	if (!b.t) {
		snprintf(err, errlen, "out of memory reading the topology");
		return -1;
	}
	find_latency_matrix(&b);
	node_facts(&b);
	ret = find_numas(&b);
	if (!ret)
		ret = find_gpus(&b);
	if (!ret)
		ret = find_nics(&b);
	if (!ret)
		ret = pair_gpus(&b);
	if (b.dist)
		hwloc_distances_release(topology, b.dist);
	for (size_t i = 0; i < b.nnics; i++)
		free(b.nics[i].nic.ports);
	free(b.nics);
	free(b.gpu_obj);
	if (ret < 0) {
		if (errlen && !err[0])
			snprintf(err, errlen, "out of memory reading the topology");
		phx_topo_free(b.t);
		return -1;
	}
	*out = b.t;
	return 0;
}

/* ------------------------------------------------------------ XML screen */

/*
 * hwloc's XML importer trusts its input more than a file from elsewhere
 * deserves, and a corrupt file crashes it rather than failing the load:
 *  - an object with some but not all of cpuset, complete_cpuset, nodeset,
 *    complete_nodeset (fixed in hwloc by open-mpi/hwloc#783);
 *  - a bitmap attribute starting with ',' (an assertion in
 *    hwloc_bitmap_sscanf);
 *  - a <topology tag without its '>' (open-mpi/hwloc#787, built-in parser);
 *  - a PU or NUMA node without an os_index or with a huge one (a bitmap
 *    of up to 512 MiB for one attribute).
 * hwloc's exporter never writes these, so refuse them before hwloc sees them.
 */
struct screen {
	unsigned sets; /* which of the four sets the tag has */
	bool bad_bitmap; /* a *cpuset or *nodeset attribute hwloc cannot parse */
	bool indexed; /* a PU or a NUMA node: hwloc sets bit os_index of a set */
	bool index_ok; /* an os_index below TOPO_MAX_OS_INDEX */
};

/*
 * The bound on a PU's or NUMA node's os_index: hwloc allocates a bitmap
 * that reaches it, 512 MiB for one without an index (taken as 2^32 - 1).
 */
#define TOPO_MAX_OS_INDEX (1u << 20)

static const char *const set_attrs[] = { "cpuset", "complete_cpuset", "nodeset",
					 "complete_nodeset" };

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *skip_space(const char *p, const char *end)
{
	while (p < end && is_space(*p))
		p++;
	return p;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

/* A bitmap word, 0x and 1 to 8 hex digits: its length, or 0 when there is none. */
static size_t hex_word(const char *v, const char *end)
{
	const char *p = v + 2;

	if (end - v < 3 || v[0] != '0' || (v[1] != 'x' && v[1] != 'X'))
		return 0;
	while (p < end && phx_hex_digit(*p) >= 0 && p - v < 10)
		p++;
	return p - v > 2 ? (size_t)(p - v) : 0;
}

/* hwloc's bitmap format: "0xf...f", or [0xf...f,]WORD followed by ",[WORD]" pieces. */
static bool bitmap_ok(const char *v, size_t n)
{
	const char *end = v + n;
	size_t w;

	if (n >= 7 && !memcmp(v, "0xf...f", 7)) {
		if (n == 7)
			return true;
		if (v[7] != ',')
			return false;
		v += 8;
	}
	w = hex_word(v, end);
	if (!w)
		return false;
	for (v += w; v < end; v += w) {
		/* Empty words stand for zero; the last one may not be empty. */
		if (*v != ',' || v + 1 == end)
			return false;
		v++;
		w = hex_word(v, end);
		if (!w && *v != ',')
			return false;
	}
	return true;
}

static bool is_attr(const char *s, size_t n, const char *want)
{
	return n == strlen(want) && !memcmp(s, want, n);
}

/* Decimal digits only, below TOPO_MAX_OS_INDEX. */
static bool small_index(const char *v, size_t n)
{
	unsigned long i = 0;

	if (!n || n > 7)
		return false;
	for (size_t k = 0; k < n; k++) {
		if (v[k] < '0' || v[k] > '9')
			return false;
		i = i * 10 + (unsigned long)(v[k] - '0');
	}
	return i < TOPO_MAX_OS_INDEX;
}

static void screen_attr(struct screen *sc, const char *name, size_t nlen, const char *val,
			size_t vlen)
{
	for (unsigned i = 0; i < 4; i++) {
		if (is_attr(name, nlen, set_attrs[i]))
			sc->sets |= 1u << i;
	}
	if ((ends_with(name, nlen, "cpuset") || ends_with(name, nlen, "nodeset")) &&
	    !bitmap_ok(val, vlen))
		sc->bad_bitmap = true;
	if (is_attr(name, nlen, "type") &&
	    (is_attr(val, vlen, "PU") || is_attr(val, vlen, "NUMANode")))
		sc->indexed = true;
	if (is_attr(name, nlen, "os_index"))
		sc->index_ok = small_index(val, vlen);
}

/* Scans the attributes of a start tag from p; returns where the tag ends. */
static const char *scan_tag(const char *p, const char *end, struct screen *sc)
{
	for (;;) {
		const char *name, *q;
		size_t nlen;

		p = skip_space(p, end);
		if (p >= end || *p == '>' || *p == '/' || *p == '<')
			return p;
		for (name = p; p < end && *p != '=' && *p != '>' && *p != '/' && !is_space(*p); p++)
			;
		nlen = (size_t)(p - name);
		p = skip_space(p, end);
		if (p >= end || *p != '=')
			continue;
		p = skip_space(p + 1, end);
		if (p >= end || (*p != '"' && *p != '\''))
			return p;
		q = memchr(p + 1, *p, (size_t)(end - p - 1));
		if (!q)
			return end;
		screen_attr(sc, name, nlen, p + 1, (size_t)(q - p - 1));
		p = q + 1;
	}
}

/*
 * After "<!DOCTYPE": a root name, then SYSTEM or PUBLIC and a quoted
 * literal. hwloc's libxml2 import reads the DTD's system identifier
 * without looking whether there is one (a DOCTYPE without it crashes it).
 */
static bool doctype_ok(const char *p, const char *end)
{
	p = skip_space(p, end);
	while (p < end && !is_space(*p) && *p != '>' && *p != '[')
		p++;
	p = skip_space(p, end);
	if (end - p < 8 || (memcmp(p, "SYSTEM", 6) && memcmp(p, "PUBLIC", 6)))
		return false;
	p = skip_space(p + 6, end);
	return p < end && (*p == '"' || *p == '\'');
}

static int screen_xml(const char *buf, size_t len, char *err, size_t errlen)
{
	const char *p = buf, *end = buf + len;

	while ((p = memchr(p, '<', (size_t)(end - p)))) {
		const char *tag = p++, *name = p;
		struct screen sc = { 0 };

		bool object;

		while (p < end && !is_space(*p) && *p != '>' && *p != '/' && *p != '<')
			p++;
		if (is_attr(name, (size_t)(p - name), "!DOCTYPE") && !doctype_ok(p, end)) {
			snprintf(err, errlen,
				 "its DOCTYPE names no DTD (hwloc writes <!DOCTYPE topology SYSTEM "
				 "\"hwloc2.dtd\">)");
			return -1;
		}
		object = is_attr(name, (size_t)(p - name), "object");
		p = scan_tag(p, end, &sc);
		if (p - name >= 8 && !memcmp(name, "topology", 8) && (p >= end || *p != '>')) {
			snprintf(err, errlen, "the <topology> tag does not end");
			return -1;
		}
		if (sc.bad_bitmap || (sc.sets && sc.sets != 0xf)) {
			snprintf(err, errlen, "the element at byte %zu has %s", (size_t)(tag - buf),
				 sc.bad_bitmap ? "a malformed CPU or NUMA node set"
					       : "only some of its CPU and NUMA node sets");
			return -1;
		}
		if (object && sc.indexed && !sc.index_ok) {
			snprintf(err, errlen,
				 "the element at byte %zu is a PU or NUMA node without an os_index "
				 "below %u",
				 (size_t)(tag - buf), TOPO_MAX_OS_INDEX);
			return -1;
		}
	}
	return 0;
}

static void refused(const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "hwloc could not read %s as a topology; give a whole file written by "
		 "'lstopo --of xml FILE' (HWLOC_XML_VERBOSE=1 shows hwloc's reason)",
		 what);
}

/*
 * hwloc unloads its plugins when its last topology is destroyed and loads
 * them again for the next; the PCI plugin's libpciaccess leaves state behind
 * each time (about 1 KiB a live discovery, seen as a leak under ASan). One
 * empty topology kept for the life of the process keeps them loaded.
 */
static hwloc_topology_t plugin_holder;
static pthread_once_t plugin_once = PTHREAD_ONCE_INIT;

static void hold_plugins(void)
{
	if (hwloc_topology_init(&plugin_holder) < 0)
		plugin_holder = NULL;
}

static int topo_init(hwloc_topology_t *topo, char *err, size_t errlen)
{
	pthread_once(&plugin_once, hold_plugins);
	if (hwloc_topology_init(topo) < 0) {
		snprintf(err, errlen, "cannot start hwloc: %s", strerror(errno));
		return -1;
	}
	/* GPUs, NICs and the bridges between them are I/O objects: keep them. */
	hwloc_topology_set_io_types_filter(*topo, HWLOC_TYPE_FILTER_KEEP_ALL);
	return 0;
}

/* Loads and discovers; what names the source in messages. */
static int load(hwloc_topology_t topo, const char *what, struct phx_node_topo **out, char *err,
		size_t errlen)
{
	char why[256];

	if (hwloc_topology_load(topo) < 0) {
		refused(what, err, errlen);
		return -1;
	}
	if (phx_topo_discover(topo, out, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", what, why);
		return -1;
	}
	return 0;
}

/* buf holds len bytes and a NUL after them, as hwloc wants. */
static int load_xml(const char *buf, size_t len, const char *what, struct phx_node_topo **out,
		    char *err, size_t errlen)
{
	hwloc_topology_t topo;
	char why[160];
	int ret = -1;

	if (len >= INT_MAX) {
		snprintf(err, errlen, "%s is too large (%zu bytes)", what, len);
		return -1;
	}
	if (screen_xml(buf, len, why, sizeof(why)) < 0) {
		snprintf(err, errlen,
			 "%s is not a topology hwloc wrote: %s; give a whole file written by "
			 "'lstopo --of xml FILE'",
			 what, why);
		return -1;
	}
	if (topo_init(&topo, err, errlen) < 0)
		return -1;
	/*
	 * hwloc parses the document here already. Since 2.10 it wants the NUL
	 * counted in the size; before, some libxml2 versions refuse it there.
	 */
	if (hwloc_topology_set_xmlbuffer(topo, buf, (int)len + 1) < 0 &&
	    (len == 0 || hwloc_topology_set_xmlbuffer(topo, buf, (int)len) < 0))
		refused(what, err, errlen);
	else
		ret = load(topo, what, out, err, errlen);
	hwloc_topology_destroy(topo);
	return ret;
}

static int load_file(const char *path, struct phx_node_topo **out, char *err, size_t errlen)
{
	char what[PATH_MAX + 32];
	char *buf;
	size_t len;
	int ret;

	snprintf(what, sizeof(what), "hwloc XML file '%s'", path);
	ret = phx_file_read(path, XML_MAX_BYTES, &buf, &len);
	if (ret == -EINVAL)
		snprintf(err, errlen, "%s is not a regular file", what);
	else if (ret == -EFBIG)
		snprintf(err, errlen, "%s is larger than %u MiB", what, XML_MAX_BYTES >> 20);
	else if (ret < 0)
		snprintf(err, errlen, "cannot read %s: %s", what, strerror(-ret));
	if (ret < 0)
		return -1;
	ret = load_xml(buf, len, what, out, err, errlen);
	free(buf);
	return ret;
}

int phx_topo_load(const char *xml_path, struct phx_node_topo **out, char *err, size_t errlen)
{
	hwloc_topology_t topo;
	int ret;

	*out = NULL;
	if (xml_path)
		return load_file(xml_path, out, err, errlen);
	if (topo_init(&topo, err, errlen) < 0)
		return -1;
	ret = load(topo, "this machine's topology", out, err, errlen);
	hwloc_topology_destroy(topo);
	return ret;
}

int phx_topo_load_xmlbuffer(const char *buf, size_t len, struct phx_node_topo **out, char *err,
			    size_t errlen)
{
	char *copy;
	int ret;

	*out = NULL;
	copy = malloc(len + 1);
	if (!copy) {
		snprintf(err, errlen, "out of memory reading an hwloc XML document");
		return -1;
	}
	memcpy(copy, buf, len);
	copy[len] = '\0';
	ret = load_xml(copy, len, "the XML document", out, err, errlen);
	free(copy);
	return ret;
}

void phx_topo_free(struct phx_node_topo *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->ngpus; i++) {
		free(t->gpus[i].cpulist);
		hwloc_bitmap_free(t->gpus[i].cpuset);
	}
	for (size_t i = 0; i < t->nnics; i++)
		free(t->nics[i].ports);
	for (size_t i = 0; i < t->nnumas; i++) {
		free(t->numas[i].cpulist);
		hwloc_bitmap_free(t->numas[i].cpuset);
	}
	free(t->gpus);
	free(t->nics);
	free(t->numas);
	free(t);
}

/* ------------------------------------------------------------ JSON */

/*
 * Adds val under key, taking it over; NULL is a JSON null only when
 * null_ok. Non-zero on failure. Callers chain these with || so keys come
 * out in a fixed order and the first failure stops the rest.
 */
static int put(struct json_object *obj, const char *key, struct json_object *val, bool null_ok)
{
	if (!val && !null_ok)
		return -ENOMEM;
	if (json_object_object_add(obj, key, val) < 0) {
		json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

/* An empty string is written as null. */
static int put_str(struct json_object *obj, const char *key, const char *s)
{
	if (!s || !s[0])
		return put(obj, key, NULL, true);
	return put(obj, key, json_object_new_string(s), false);
}

static int put_int(struct json_object *obj, const char *key, int64_t v)
{
	return put(obj, key, json_object_new_int64(v), false);
}

static int put_bool(struct json_object *obj, const char *key, bool v)
{
	return put(obj, key, json_object_new_boolean(v), false);
}

/* Negative values (unknown) are written as null. */
static int put_opt(struct json_object *obj, const char *key, int64_t v)
{
	return v < 0 ? put(obj, key, NULL, true) : put_int(obj, key, v);
}

static int put_pci_id(struct json_object *obj, const char *pci, uint16_t vendor, uint16_t device)
{
	char id[16];

	if (!pci[0])
		return put(obj, "pci_id", NULL, true);
	snprintf(id, sizeof(id), "%04x:%04x", vendor, device);
	return put_str(obj, "pci_id", id);
}

static int put_array(struct json_object *obj, const char *key, struct json_object **arr)
{
	*arr = json_object_new_array();
	return put(obj, key, *arr, false);
}

static int add_int(struct json_object *arr, int64_t v)
{
	struct json_object *o = json_object_new_int64(v);

	if (!o || json_object_array_add(arr, o) < 0) {
		json_object_put(o);
		return -ENOMEM;
	}
	return 0;
}

static int add_obj(struct json_object *arr, struct json_object **obj)
{
	*obj = json_object_new_object();
	if (!*obj || json_object_array_add(arr, *obj) < 0) {
		json_object_put(*obj);
		return -ENOMEM;
	}
	return 0;
}

static int gpu_json(struct json_object *arr, const struct phx_node_topo *t,
		    const struct phx_topo_gpu *g)
{
	const struct phx_topo_nic *nic = g->nic >= 0 ? &t->nics[g->nic] : NULL;
	bool pci_near = g->prox == PHX_PROX_PCIE_SWITCH || g->prox == PHX_PROX_HOST_BRIDGE;
	struct json_object *o;

	return add_obj(arr, &o) || put_int(o, "index", g->index) || put_str(o, "pci", g->pci) ||
	       put_pci_id(o, g->pci, g->vendor_id, g->device_id) || put_opt(o, "numa", g->numa) ||
	       put_str(o, "cpus", g->cpulist) || put_str(o, "nic", nic ? nic->name : NULL) ||
	       put_str(o, "proximity", phx_topo_prox_name(g->prox)) || put_str(o, "via", g->via) ||
	       put_opt(o, "pci_hops", pci_near ? (int64_t)g->pci_hops : -1) ||
	       put_opt(o, "numa_distance",
		       g->prox == PHX_PROX_NUMA_DISTANCE ? (int64_t)g->numa_distance : -1);
}

static int port_json(struct json_object *arr, const struct phx_topo_port *p)
{
	struct json_object *o;

	return add_obj(arr, &o) || put_int(o, "port", p->num) ||
	       put_str(o, "state", phx_port_state_name(p->state)) || put_opt(o, "lid", p->lid) ||
	       put_str(o, "link_layer", p->link_layer) || put_str(o, "netdev", p->netdev);
}

static int nic_json(struct json_object *arr, const struct phx_node_topo *t,
		    const struct phx_topo_nic *n)
{
	struct json_object *o, *ports, *gpus;

	if (add_obj(arr, &o) || put_str(o, "name", n->name) ||
	    put_str(o, "kind", phx_nic_kind_name(n->kind)) || put_bool(o, "rdma", n->rdma) ||
	    put_bool(o, "usable", n->usable) || put_str(o, "pci", n->pci) ||
	    put_pci_id(o, n->pci, n->vendor_id, n->device_id) || put_opt(o, "numa", n->numa) ||
	    put_str(o, "netdev", n->netdev) || put_str(o, "node_guid", n->node_guid) ||
	    put_array(o, "ports", &ports) || put_array(o, "gpus", &gpus))
		return -ENOMEM;
	for (size_t i = 0; i < n->nports; i++) {
		if (port_json(ports, &n->ports[i]))
			return -ENOMEM;
	}
	for (size_t i = 0; i < t->ngpus; i++) {
		if (t->gpus[i].nic == (int)n->index && add_int(gpus, t->gpus[i].index))
			return -ENOMEM;
	}
	return 0;
}

static int numa_json(struct json_object *arr, const struct phx_topo_numa *n)
{
	struct json_object *o;

	return add_obj(arr, &o) || put_int(o, "os_index", n->os_index) ||
	       put_str(o, "cpus", n->cpulist) ||
	       put_int(o, "memory", n->memory > INT64_MAX ? INT64_MAX : (int64_t)n->memory);
}

static int node_json(struct json_object *o, const struct phx_node_topo *t)
{
	struct json_object *numas, *gpus, *nics;

	if (put_str(o, "hostname", t->hostname) || put_int(o, "packages", t->npackages) ||
	    put_int(o, "pus", t->npus) || put_array(o, "numa_nodes", &numas) ||
	    put_array(o, "gpus", &gpus) || put_array(o, "nics", &nics))
		return -ENOMEM;
	for (size_t i = 0; i < t->nnumas; i++) {
		if (numa_json(numas, &t->numas[i]))
			return -ENOMEM;
	}
	for (size_t i = 0; i < t->ngpus; i++) {
		if (gpu_json(gpus, t, &t->gpus[i]))
			return -ENOMEM;
	}
	for (size_t i = 0; i < t->nnics; i++) {
		if (nic_json(nics, t, &t->nics[i]))
			return -ENOMEM;
	}
	return 0;
}

int phx_topo_to_json(const struct phx_node_topo *t, struct json_object **out)
{
	struct json_object *o = json_object_new_object();

	*out = NULL;
	if (!o || node_json(o, t)) {
		json_object_put(o);
		return -ENOMEM;
	}
	*out = o;
	return 0;
}
