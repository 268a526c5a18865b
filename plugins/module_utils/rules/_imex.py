# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The IMEX domain rules (the imex role's plan and the readiness check ``imex.domain`` read them; docs/roles/imex.md):

* **who is in the domain**: the hosts of one inventory group (``nodeprep_imex_domain_group``), not what the fabric
  reports at the moment of the run.  NVIDIA's IMEX guide (Deployment Models, "NVLink Domain Wide"): every node's
  IMEX is configured with the addresses of all compute nodes of the domain, and the daemons verify that their address
  maps agree ("IP address mapping discrepancies will lead to failures").  A list derived from the GPUs' clique would
  drop a tray that is down or whose fabric registration failed, change every other node's list and restart every
  daemon of the rack (their imports are cleaned up); the inventory keeps the down peer listed and readiness names it.
  The GPUs' NVLink clique (cluster UUID and clique id, ``nvidia-smi -q``'s fabric block; NVIDIA/k8s-dra-driver-gpu
  joins them as ``<clusterUUID>.<cliqueId>``) checks the group: its members must all be in one clique.
* **the order**: ascending address (IPv4 before IPv6, numerically), the same on every node whatever the inventory's
  order; the index of a node is its place in this list.  Public captures list the nodes of a domain this way
  (AWS PCS's GB200 capture: Node #0 ... #17 in ascending address).
* **the address** of a member: its ``nodeprep_imex_address``, else its ``ansible_host``, else its inventory name; an
  IPv4 or IPv6 address (the guide: nodes_config.cfg holds "the IP address information of all involved nodes").
* **the channel**: ``/dev/nvidia-caps-imex-channels/channel0``, a character device with the major the driver
  registered for ``nvidia-caps-imex-channels`` in ``/proc/devices`` and minor 0, mode 0666 (the guide's listing shows
  ``crw-rw-rw-``; Slurm's switch/nvidia_imex and NVIDIA's DRA driver make theirs 0666), made again at every boot
  (the guide: channels "are not created by default" and "will not persist through a reboot").
* **the domain is up** when ``nvidia-imex-ctl -N -j`` says UP and names every peer READY, every connection
  CONNECTED, and lists the wanted nodes in the wanted order.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ipaddress

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import (
    CHANNEL_DEVICE,
    CHANNEL_DIR,
    CONNECTED,
    READY,
    channel_path,
)

CHANNEL_MODE = '0666'
CHANNEL_DIR_MODE = '0755'
# The minors the collection makes: the default channel only (Slurm's switch/nvidia_imex hands out the others).
CHANNEL_MINORS = (0,)
# Where a member's address comes from, in this order.
ADDRESS_SOURCES = ('nodeprep_imex_address', 'ansible_host', 'inventory_hostname')
# What a node in the text form's legend means, for the messages (NVIDIA IMEX guide, nvidia-imex-ctl -N legend).
CONNECTION_WORDS = {
    'INVALID': 'no status (the node did not answer)',
    'NEVER_CONNECTED': 'never connected',
    'RECOVERING': 'connection lost, not cleaned up yet',
    'DISCONNECTED': 'connection lost and cleaned up',
    'AUTHENTICATING': 'authenticating',
    'VERSION_MISMATCH': 'version mismatch, communication disabled',
    'NODE_MAP_MISMATCH': 'node map mismatch, communication disabled: the two daemons run different node lists',
}


class DomainError(Exception):
    """A domain that cannot be configured as given (the message names the host, the value and what is allowed)."""


def parse_address(value, what):
    """``value`` as an IP address string (compressed form); DomainError naming ``what`` otherwise."""
    if isinstance(value, bool) or value is None or not str(value).strip():
        raise DomainError('{0} is {1!r}, not an IP address'.format(what, value))
    text = str(value).strip()
    try:
        return ipaddress.ip_address(text).compressed
    except ValueError:
        raise DomainError('{0} is {1!r}, not an IPv4 or IPv6 address (nodes_config.cfg holds addresses; set '
                          'nodeprep_imex_address for that host)'.format(what, text))


def _sort_key(address):
    ip = ipaddress.ip_address(address)
    return (ip.version, int(ip))


def ordered(addresses):
    """The addresses in the domain's order (ascending; IPv4 before IPv6)."""
    return sorted(addresses, key=_sort_key)


def nodes_config_text(addresses):
    """The content of nodes_config.cfg: one address a line, in the domain's order, nothing else (no comment: the
    file is the daemon's node map and NVIDIA documents no comment syntax for it)."""
    return ''.join('{0}\n'.format(address) for address in ordered(addresses))


def member_address(member):
    """(address, source) of one member as the action hands it ({'host', 'values': {source: value}}); DomainError
    when the first source that is set is not an address."""
    values = member.get('values') or {}
    for source in ADDRESS_SOURCES:
        value = values.get(source)
        if value is not None and str(value).strip() != '':
            return parse_address(value, '{0} of {1}'.format(source, member.get('host'))), source
    raise DomainError('{0} has no address: set nodeprep_imex_address (or ansible_host) for it'.format(
        member.get('host')))


def domain_peers(members, host):
    """The domain of ``host`` from ``members`` (what gpufleet.nodeprep.node_plan hands the plan: ``{'group', 'found',
    'hosts': [{'host', 'values', 'error', 'fabric'}]}``): ``(peers, errors)``; ``peers`` is
    ``[{'host', 'address', 'source', 'fabric'}]`` in the domain's order, ``errors`` what makes the domain unusable
    (then ``peers`` is empty)."""
    group = members.get('group')
    if not members.get('found'):
        return [], ['nodeprep_imex_domain_group={0!r}: the inventory has no group of that name (the group of the '
                    'NVLink domain, for example the 18 compute trays of one NVL72 rack)'.format(group)]
    hosts = members.get('hosts') or []
    names = [m.get('host') for m in hosts]
    if host not in names:
        return [], ['nodeprep_imex_domain_group={0!r}: {1} is not in that group (its members: {2})'.format(
            group, host, ', '.join(names) or 'none')]
    errors = []
    peers = []
    for member in hosts:
        if member.get('error'):
            errors.append('{0}: {1}'.format(member.get('host'), member['error']))
            continue
        try:
            address, source = member_address(member)
        except DomainError as exc:
            errors.append(str(exc))
            continue
        peers.append({'host': member.get('host'), 'address': address, 'source': source,
                      'fabric': member.get('fabric')})
    seen = {}
    for peer in peers:
        seen.setdefault(peer['address'], []).append(peer['host'])
    for address, owners in sorted(seen.items()):
        if len(owners) > 1:
            errors.append('{0} share the address {1}: each node of an IMEX domain needs its own'.format(
                ' and '.join(owners), address))
    if errors:
        return [], ['IMEX domain {0!r}: {1}'.format(group, '; '.join(errors))]
    order = dict((address, i) for i, address in enumerate(ordered([p['address'] for p in peers])))
    return sorted(peers, key=lambda p: order[p['address']]), []


def label(peers, address):
    """``host (address)`` of a peer, or the address alone when no peer has it."""
    for peer in peers:
        if peer['address'] == address:
            return '{0} ({1})'.format(peer['host'], address)
    return address


# -- the NVLink clique of a node ---------------------------------------------------------------------------------------

def clique_of(gpus):
    """(clique, problem) of a node from its GPUs' fabric blocks (``ansible_facts.nvidia.gpus[*].fabric``):
    ``<clusterUuid>.<cliqueId>`` when every GPU reports the same one with state Completed; None and why otherwise
    (None and None on GPUs without an NVLink fabric clique, such as HGX boards)."""
    keys = []
    pending = []
    for gpu in gpus or []:
        fabric = (gpu or {}).get('fabric') if isinstance(gpu, dict) else None
        if not isinstance(fabric, dict) or not fabric.get('cluster_uuid') or fabric.get('clique_id') is None:
            continue
        if fabric.get('state') != 'Completed':
            pending.append('{0} fabric state {1}'.format(gpu.get('pci_bus_id') or 'GPU', fabric.get('state')))
            continue
        keys.append('{0}.{1}'.format(fabric['cluster_uuid'], fabric['clique_id']))
    if pending:
        return None, 'not registered in an NVLink clique yet ({0})'.format(', '.join(pending))
    if not keys:
        return None, None
    if len(set(keys)) > 1:
        return None, 'its GPUs are in different NVLink cliques ({0})'.format(', '.join(sorted(set(keys))))
    return keys[0], None


def clique_drift(peers, host, own_gpus):
    """Messages when the group is not one NVLink clique: this node's GPUs disagree or are not registered, or a peer
    whose GPUs were read in this run is in another clique than this node."""
    own, problem = clique_of(own_gpus)
    out = []
    if problem:
        out.append('{0}: {1}'.format(host, problem))
    if own is None:
        return out
    for peer in peers:
        if peer['host'] == host or not peer.get('fabric'):
            continue
        theirs, dummy = clique_of(peer['fabric'])
        if theirs is not None and theirs != own:
            out.append('{0} is in NVLink clique {1}, {2} in {3}: they cannot share memory over NVLink, so they are '
                       'not one IMEX domain (fix the inventory group)'.format(peer['host'], theirs, host, own))
    return out


# -- the channel -----------------------------------------------------------------------------------------------------

def channel_drift(channels, minors=CHANNEL_MINORS):
    """What differs from the wanted channel devices, from the gathered ``imex.channels``; [] when they are right.
    Without the driver's major (driver not loaded) the devices cannot be judged: one message says so."""
    channels = channels if isinstance(channels, dict) else {}
    major = channels.get('major')
    if major is None:
        why = channels.get('error') or 'no {0} line in /proc/devices'.format(CHANNEL_DEVICE)
        return ['the driver has not registered {0} ({1}): is the NVIDIA driver loaded?'.format(CHANNEL_DEVICE, why)]
    out = []
    folder = channels.get('dir') or {}
    if folder.get('exists') and folder.get('type') != 'directory':
        out.append('{0} is a {1}, not a directory'.format(CHANNEL_DIR, folder.get('type')))
    for minor in minors:
        path = channel_path(minor)
        node = (channels.get('nodes') or {}).get(str(minor)) or {}
        if not node.get('exists'):
            out.append('{0} does not exist (char {1}:{2} wanted)'.format(path, major, minor))
        elif node.get('type') != 'char':
            out.append('{0} is a {1}, not a character device'.format(path, node.get('type')))
        elif (node.get('major'), node.get('minor')) != (major, minor):
            out.append('{0} is char {1}:{2}, the driver registered {3}:{4}'.format(
                path, node.get('major'), node.get('minor'), major, minor))
        elif node.get('mode') != CHANNEL_MODE or node.get('uid') != 0 or node.get('gid') != 0:
            out.append('{0} has mode {1} owner {2}:{3}, wanted {4} root:root'.format(
                path, node.get('mode'), node.get('uid'), node.get('gid'), CHANNEL_MODE))
    return out


# -- the domain as nvidia-imex-ctl -N -j shows it --------------------------------------------------------------------

def domain_drift(domain, peers, own_address):
    """Messages naming what is not up in ``domain`` (parsers/_imex.parse_domain_json) for the wanted ``peers``:
    a node list that is not the wanted one, each peer that is not READY, each connection that is not CONNECTED
    (from this node to a peer, and between two READY peers), and the domain state.  [] when all is up."""
    out = []
    wanted = [p['address'] for p in peers]
    listed = [n['host'] for n in domain.get('nodes') or []]
    if listed != wanted:
        out.append('nvidia-imex-ctl lists the nodes {0}, not the wanted {1} (nodes_config.cfg and the daemon '
                   'disagree)'.format(', '.join(listed) or 'none', ', '.join(wanted)))
    by_index = dict((n['index'], n) for n in domain.get('nodes') or [])
    for node in domain.get('nodes') or []:
        if node['status'] != READY:
            who = 'this node\'s IMEX daemon' if node['host'] == own_address else 'peer'
            out.append('{0} {1} is {2}{3}'.format(who, label(peers, node['host']), node['status'] or 'not reported',
                                                  ' (it does not answer: nvidia-imex stopped, or the node is down or '
                                                  'unreachable)' if node['status'] == 'UNAVAILABLE' else ''))
    for node in domain.get('nodes') or []:
        if node['status'] != READY:
            continue
        for conn in node.get('connections') or []:
            other = by_index.get(conn['index'])
            if conn['status'] == CONNECTED or (other is not None and other['status'] != READY
                                               and node['host'] != own_address):
                continue
            if other is not None and other['host'] == node['host']:
                continue
            target = conn.get('host') or (other or {}).get('host') or '#{0}'.format(conn['index'])
            words = CONNECTION_WORDS.get(conn['status'])
            out.append('{0} -> {1}: {2}{3}'.format(label(peers, node['host']), label(peers, target),
                                                   conn['status'] or 'no status', ' ({0})'.format(words) if words
                                                   else ''))
    if domain.get('status') != 'UP':
        out.append('IMEX domain {0}'.format(domain.get('status') or 'state not reported'))
    return out


def domain_summary(domain):
    """One line of what the ctl said: ``UP: 3/3 nodes READY, all connected``."""
    nodes = domain.get('nodes') or []
    ready = len([n for n in nodes if n['status'] == READY])
    broken = len([c for n in nodes if n['status'] == READY for c in n.get('connections') or []
                  if c['status'] != CONNECTED])
    links = 'all connected' if not broken else '{0} connections not CONNECTED'.format(broken)
    return '{0}: {1}/{2} nodes READY, {3}'.format(domain.get('status'), ready, len(nodes), links)
