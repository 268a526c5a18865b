# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/rules/_imex.py: who is in an IMEX domain and in which order, the channel device, the NVLink
clique, and what nvidia-imex-ctl -N -j says is not up."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import parse_domain_json
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _imex as R


def member(host, ansible_host=None, address=None, error=None, fabric=None):
    values = {'inventory_hostname': host}
    if ansible_host is not None:
        values['ansible_host'] = ansible_host
    if address is not None:
        values['nodeprep_imex_address'] = address
    return {'host': host, 'values': values, 'error': error, 'fabric': fabric}


def members(*hosts, **kw):
    return {'group': kw.get('group', 'rack7'), 'found': kw.get('found', True), 'hosts': list(hosts)}


def test_the_order_is_by_address_not_by_text_nor_inventory():
    # As text 10.0.7.12 < 10.0.7.21 < 10.0.7.3; as addresses .3 < .12 < .21.  IPv4 before IPv6.
    assert R.ordered(['10.0.7.21', '10.0.7.3', 'fd00::2', '10.0.7.12', '9.1.1.1']) == [
        '9.1.1.1', '10.0.7.3', '10.0.7.12', '10.0.7.21', 'fd00::2']
    assert R.nodes_config_text(['10.0.7.21', '10.0.7.3']) == '10.0.7.3\n10.0.7.21\n'


def test_the_domain_of_a_host():
    peers, errors = R.domain_peers(members(member('b', '10.0.7.12'), member('a', '10.0.7.3', address='10.1.0.3'),
                                           member('10.0.7.21')), 'b')
    assert errors == []
    assert [(p['host'], p['address'], p['source']) for p in peers] == [
        ('b', '10.0.7.12', 'ansible_host'), ('10.0.7.21', '10.0.7.21', 'inventory_hostname'),
        ('a', '10.1.0.3', 'nodeprep_imex_address')]


@pytest.mark.parametrize('group, host, message', [
    (members(found=False), 'a', "nodeprep_imex_domain_group='rack7': the inventory has no group of that name (the group "
                                'of the NVLink domain, for example the 18 compute trays of one NVL72 rack)'),
    (members(member('b', '10.0.0.2')), 'a', "nodeprep_imex_domain_group='rack7': a is not in that group (its "
                                            'members: b)'),
    (members(member('a', '10.0.0.1'), member('tray-b.example', None)), 'a',
     "IMEX domain 'rack7': inventory_hostname of tray-b.example is 'tray-b.example', not an IPv4 or IPv6 address "
     '(nodes_config.cfg holds addresses; set nodeprep_imex_address for that host)'),
    (members(member('a', '10.0.0.1'), member('b', 'node-b', address='')), 'a',
     "IMEX domain 'rack7': ansible_host of b is 'node-b', not an IPv4 or IPv6 address (nodes_config.cfg holds "
     'addresses; set nodeprep_imex_address for that host)'),
    (members(member('a', '10.0.0.1'), member('b', '10.0.0.1'), member('c', '10.0.0.300')), 'a',
     "IMEX domain 'rack7': ansible_host of c is '10.0.0.300', not an IPv4 or IPv6 address (nodes_config.cfg holds "
     'addresses; set nodeprep_imex_address for that host); a and b share the address 10.0.0.1: each node of an '
     'IMEX domain needs its own'),
    (members(member('a', '10.0.0.1'), member('b', error='cannot read its address variables: undefined')), 'a',
     "IMEX domain 'rack7': b: cannot read its address variables: undefined"),
])
def test_domains_that_cannot_be_configured(group, host, message):
    assert R.domain_peers(group, host) == ([], [message])


def gpus(state='Completed', uuid='00000001-0000-0000-0000-000000000001', clique='2', count=4):
    return [{'pci_bus_id': '00000009:01:00.{0}'.format(i),
             'fabric': {'state': state, 'status': 'Success', 'cluster_uuid': uuid, 'clique_id': clique}}
            for i in range(count)]


def test_the_clique_of_a_node():
    # The GB200 capture's fabric block (tests/fixtures/nvidia-smi-xml/gb200-4gpu-arm64_k8s-test-infra.xml): state
    # Completed, cliqueId and clusterUuid; NVIDIA's DRA driver joins them as <clusterUUID>.<cliqueId>.
    assert R.clique_of(gpus()) == ('00000001-0000-0000-0000-000000000001.2', None)
    assert R.clique_of([{'fabric': None}, {'fabric': {'state': 'N/A', 'cluster_uuid': None, 'clique_id': None}}]) == \
        (None, None)
    assert R.clique_of(gpus()[:3] + gpus(clique='3')[3:]) == (None, 'its GPUs are in different NVLink cliques '
                                                              '(00000001-0000-0000-0000-000000000001.2, '
                                                              '00000001-0000-0000-0000-000000000001.3)')
    pending = gpus()
    pending[1]['fabric']['state'] = 'In Progress'
    assert R.clique_of(pending) == (None, 'not registered in an NVLink clique yet (00000009:01:00.1 fabric state In '
                                          'Progress)')


def test_clique_drift_names_the_member_in_another_clique():
    peers = [{'host': 'a', 'address': '10.0.0.1', 'fabric': None},
             {'host': 'b', 'address': '10.0.0.2', 'fabric': gpus(clique='7')},
             {'host': 'c', 'address': '10.0.0.3', 'fabric': gpus()}]
    assert R.clique_drift(peers, 'a', gpus()) == [
        'b is in NVLink clique 00000001-0000-0000-0000-000000000001.7, a in 00000001-0000-0000-0000-000000000001.2: '
        'they cannot share memory over NVLink, so they are not one IMEX domain (fix the inventory group)']
    assert R.clique_drift(peers, 'a', []) == []


def chan(major=234, node=None, error=None, folder=None):
    default = {'exists': True, 'type': 'char', 'major': 234, 'minor': 0, 'mode': '0666', 'uid': 0, 'gid': 0}
    return {'major': major, 'error': error, 'dir': folder or {'exists': True, 'type': 'directory'},
            'nodes': {'0': default if node is None else node}}


@pytest.mark.parametrize('channels, words', [
    (chan(), []),
    (chan(major=None), ['the driver has not registered nvidia-caps-imex-channels (no nvidia-caps-imex-channels line '
                        'in /proc/devices): is the NVIDIA driver loaded?']),
    (chan(node={'exists': False}), ['/dev/nvidia-caps-imex-channels/channel0 does not exist (char 234:0 wanted)']),
    (chan(major=235), ['/dev/nvidia-caps-imex-channels/channel0 is char 234:0, the driver registered 235:0']),
    (chan(node={'exists': True, 'type': 'file'}), ['/dev/nvidia-caps-imex-channels/channel0 is a file, not a '
                                                   'character device']),
    (chan(node={'exists': True, 'type': 'char', 'major': 234, 'minor': 0, 'mode': '0600', 'uid': 0, 'gid': 0}),
     ['/dev/nvidia-caps-imex-channels/channel0 has mode 0600 owner 0:0, wanted 0666 root:root']),
    (chan(folder={'exists': True, 'type': 'file'}), ['/dev/nvidia-caps-imex-channels is a file, not a directory']),
])
def test_the_channel(channels, words):
    assert R.channel_drift(channels) == words


PEERS = [{'host': 'tray-a', 'address': '10.0.0.1'}, {'host': 'tray-b', 'address': '10.0.0.2'},
         {'host': 'tray-c', 'address': '10.0.0.3'}]


def domain(status='UP', states=('READY', 'READY', 'READY'), links=None, hosts=('10.0.0.1', '10.0.0.2', '10.0.0.3')):
    """-N -j of a 3-node domain in the shape NVIDIA's tests show; ``links``: {(from, to): status} not CONNECTED."""
    links = links or {}
    nodes = {}
    for i, host in enumerate(hosts):
        conns = dict((str(j), {'host': other, 'status': links.get((i, j), 'CONNECTED'), 'changed': True})
                     for j, other in enumerate(hosts))
        nodes[str(i)] = {'status': states[i], 'host': host, 'connections': conns, 'version': '580.95', 'hostName': ''}
    return parse_domain_json(json.dumps({'nodes': nodes, 'timestamp': '1/1/2026 00:00:00.000', 'status': status}))


def test_an_up_domain_has_no_drift():
    assert R.domain_drift(domain(), PEERS, '10.0.0.1') == []
    assert R.domain_summary(domain()) == 'UP: 3/3 nodes READY, all connected'


def test_a_peer_down_is_named_once_with_what_this_node_sees():
    down = domain('DEGRADED', ('READY', 'UNAVAILABLE', 'READY'),
                  {(0, 1): 'RECOVERING', (2, 1): 'RECOVERING', (1, 0): 'INVALID', (1, 1): 'INVALID',
                   (1, 2): 'INVALID'})
    assert R.domain_drift(down, PEERS, '10.0.0.1') == [
        'peer tray-b (10.0.0.2) is UNAVAILABLE (it does not answer: nvidia-imex stopped, or the node is down or '
        'unreachable)',
        'tray-a (10.0.0.1) -> tray-b (10.0.0.2): RECOVERING (connection lost, not cleaned up yet)',
        'IMEX domain DEGRADED']
    assert R.domain_summary(down) == 'DEGRADED: 2/3 nodes READY, 2 connections not CONNECTED'


def test_this_node_down_and_two_daemons_on_different_lists():
    own = domain('DEGRADED', ('UNAVAILABLE', 'READY', 'READY'),
                 {(1, 2): 'NODE_MAP_MISMATCH', (2, 1): 'NODE_MAP_MISMATCH'})
    assert R.domain_drift(own, PEERS, '10.0.0.1') == [
        "this node's IMEX daemon tray-a (10.0.0.1) is UNAVAILABLE (it does not answer: nvidia-imex stopped, or the "
        'node is down or unreachable)',
        'tray-b (10.0.0.2) -> tray-c (10.0.0.3): NODE_MAP_MISMATCH (node map mismatch, communication disabled: the '
        'two daemons run different node lists)',
        'tray-c (10.0.0.3) -> tray-b (10.0.0.2): NODE_MAP_MISMATCH (node map mismatch, communication disabled: the '
        'two daemons run different node lists)',
        'IMEX domain DEGRADED']


def test_a_node_list_that_is_not_the_wanted_one():
    old = domain(hosts=('10.0.0.2', '10.0.0.1'), states=('READY', 'READY'))
    assert R.domain_drift(old, PEERS, '10.0.0.1') == [
        'nvidia-imex-ctl lists the nodes 10.0.0.2, 10.0.0.1, not the wanted 10.0.0.1, 10.0.0.2, 10.0.0.3 '
        '(nodes_config.cfg and the daemon disagree)']


def test_addresses():
    assert R.parse_address(' fd00:0::1 ', 'x') == 'fd00::1'
    for bad in (None, '', True, 'host.example', '10.0.0.256'):
        with pytest.raises(R.DomainError):
            R.parse_address(bad, 'x')
