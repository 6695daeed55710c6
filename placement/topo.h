/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node topology through hwloc: the GPUs, the network adapters, the NUMA
 * nodes and their CPUs, and for every GPU the RDMA NIC it should use.
 *
 * GPUs are NVIDIA PCI functions of class 0300 (VGA) or 0302 (3D), found
 * whether or not hwloc has a CUDA/NVML backend, and numbered in PCI bus
 * order (what CUDA_DEVICE_ORDER=PCI_BUS_ID gives). A GPU is paired with the
 * nearest RDMA NIC: same PCIe switch, else same host bridge, else same NUMA
 * node, else the nearest NUMA node by hwloc's latency matrix, else same
 * package, else any. NICs are shared out evenly: in each round every NIC
 * takes at most one GPU, the closest pairs first, so no NIC serves two GPUs
 * while another sits idle. The result depends on the topology alone, so
 * every node that reads the same topology gets the same pairing.
 */
#ifndef PHX_TOPO_H
#define PHX_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hwloc.h>

struct json_object;

#define PHX_TOPO_PCI_LEN 16 /* "0000:07:00.0" */
#define PHX_TOPO_NAME_LEN 64

/* How close a GPU is to its NIC; lower is closer. */
enum phx_topo_prox {
	PHX_PROX_PCIE_SWITCH = 0, /* a PCI bridge below the host bridge is common */
	PHX_PROX_HOST_BRIDGE, /* same host bridge (root complex), no switch */
	PHX_PROX_NUMA, /* same NUMA node */
	PHX_PROX_NUMA_DISTANCE, /* other NUMA node, ranked by hwloc's latency matrix */
	PHX_PROX_PACKAGE, /* same package (no latency matrix) */
	PHX_PROX_SYSTEM, /* anywhere else in the node */
	PHX_PROX_NONE, /* the GPU has no NIC */
};

enum phx_nic_kind {
	PHX_NIC_IB = 0, /* InfiniBand HCA, or an IPoIB netdev */
	PHX_NIC_ROCE, /* RDMA over Ethernet (verbs device on an Ethernet port) */
	PHX_NIC_ETH, /* plain Ethernet netdev, no verbs device */
};

/* Values of hwloc's "Port<N>State": the kernel's ibv_port_state numbers. */
enum phx_port_state {
	PHX_PORT_UNKNOWN = 0, /* not recorded */
	PHX_PORT_DOWN = 1,
	PHX_PORT_INIT = 2,
	PHX_PORT_ARMED = 3,
	PHX_PORT_ACTIVE = 4,
	PHX_PORT_ACTIVE_DEFER = 5,
};

struct phx_topo_port {
	unsigned num; /* 1-based, as in /sys/class/infiniband/X/ports/N */
	enum phx_port_state state;
	long lid; /* -1 when not recorded */
	char link_layer[16]; /* "InfiniBand", "Ethernet", or "" when not recorded */
	char netdev[PHX_TOPO_NAME_LEN]; /* "ib0" when hwloc shows it, else "" */
};

struct phx_topo_nic {
	unsigned index; /* position in nics[]: PCI bus order */
	char name[PHX_TOPO_NAME_LEN]; /* verbs device ("mlx5_1"), else the netdev */
	enum phx_nic_kind kind;
	bool rdma; /* has a verbs (OpenFabrics) device */
	bool usable; /* a port is active, or no state was recorded */
	char pci[PHX_TOPO_PCI_LEN]; /* "" when not on PCI */
	uint16_t vendor_id, device_id;
	int numa; /* NUMA node os index, -1 when not one node */
	char netdev[PHX_TOPO_NAME_LEN]; /* first netdev of the adapter, or "" */
	char node_guid[32]; /* "0800:3800:01bf:f8d8" or "" */
	struct phx_topo_port *ports;
	size_t nports;
	unsigned ngpus; /* GPUs paired with this NIC */
};

struct phx_topo_gpu {
	unsigned index; /* PCI bus order */
	char pci[PHX_TOPO_PCI_LEN];
	uint16_t vendor_id, device_id, class_id;
	int numa; /* NUMA node os index, -1 when not one node */
	char *cpulist; /* CPUs near the GPU, Linux list format "0-23,48-71" */
	hwloc_bitmap_t cpuset; /* the same CPUs */
	int nic; /* index in nics[], -1 when the node has no RDMA NIC */
	enum phx_topo_prox prox; /* how close that NIC is */
	char via[PHX_TOPO_PCI_LEN]; /* deepest common PCI bridge, for PHX_PROX_PCIE_SWITCH */
	unsigned pci_hops; /* PCI links from GPU to NIC, when they share a host bridge */
	unsigned numa_distance; /* matrix value, for PHX_PROX_NUMA_DISTANCE; else 0 */
};

struct phx_topo_numa {
	unsigned os_index;
	char *cpulist;
	hwloc_bitmap_t cpuset;
	uint64_t memory; /* bytes local to the node, 0 when not recorded */
};

struct phx_node_topo {
	char hostname[PHX_TOPO_NAME_LEN]; /* hwloc's "HostName", or "" */
	unsigned npackages, npus;
	struct phx_topo_gpu *gpus;
	size_t ngpus;
	struct phx_topo_nic *nics;
	size_t nnics;
	struct phx_topo_numa *numas;
	size_t nnumas;
};

/*
 * Discovers the node from the hwloc XML file at xml_path (as written by
 * 'lstopo --of xml'), or from this machine when xml_path is NULL.
 * Returns 0 with *out set (free it with phx_topo_free), or -1 with a
 * reason in err naming the file.
 */
int phx_topo_load(const char *xml_path, struct phx_node_topo **out, char *err, size_t errlen);
/* The same from an XML document in memory (len bytes, no NUL needed). */
int phx_topo_load_xmlbuffer(const char *buf, size_t len, struct phx_node_topo **out, char *err,
			    size_t errlen);
/*
 * The same from a topology the caller loaded; its I/O type filter must keep
 * PCI devices, bridges and OS devices or no GPU will be found.
 */
int phx_topo_discover(hwloc_topology_t topology, struct phx_node_topo **out, char *err,
		      size_t errlen);
void phx_topo_free(struct phx_node_topo *topo);

/* The node as a JSON object (for the exchange between nodes). 0 or -ENOMEM. */
int phx_topo_to_json(const struct phx_node_topo *topo, struct json_object **out);

const char *phx_topo_prox_name(enum phx_topo_prox prox);
const char *phx_nic_kind_name(enum phx_nic_kind kind);
const char *phx_port_state_name(enum phx_port_state state);

#endif
