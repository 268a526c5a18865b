# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU double's IMEX (tests/testbed/gpu_double/lib/imex_double.py): daemons that see each other over real TCP
sockets (on loopback addresses here, on the nodes' own addresses in the fleet), the ctl's JSON read by the
collection's own parser, the peer-down and node-map states; and its /proc/devices with a dynamic major."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import socket
import sys

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import (
    char_major,
    parse_domain_json,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _imex
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

DOUBLE = os.path.join(ROOT, 'tests', 'testbed', 'gpu_double')
sys.path.insert(0, os.path.join(DOUBLE, 'lib'))

import gpudouble as gd  # noqa: E402
import imex_double as X  # noqa: E402

NODES = ['127.0.0.2', '127.0.0.3', '127.0.0.4']


def free_port():
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def ports():
    return free_port(), free_port()


def daemon(address, ports, nodes=None, version='580.95.05'):
    nodes = NODES if nodes is None else nodes
    config = {'BIND_INTERFACE_IP': address, 'SERVER_PORT': str(ports[0]), 'IMEX_CMD_ENABLED': '1',
              'IMEX_CMD_BIND_INTERFACE_IP': address, 'IMEX_CMD_PORT': str(ports[1])}
    return X.Daemon(config, list(nodes), version)


def test_three_daemons_form_an_up_domain(ports):
    daemons = [daemon(a, ports) for a in NODES]
    try:
        for one in daemons:
            one.start_serving()
        for one in daemons:
            one.probe()
        dom = X.domain(NODES, ports[1])
        parsed = parse_domain_json(json.dumps(dom))
        assert parsed['status'] == 'UP'
        assert [(n['host'], n['status'], n['version']) for n in parsed['nodes']] == [
            (a, 'READY', '580.95.05') for a in NODES]
        assert all(c['status'] == 'CONNECTED' for n in parsed['nodes'] for c in n['connections'])
        peers = [{'host': 'n{0}'.format(i), 'address': a} for i, a in enumerate(NODES)]
        assert _imex.domain_drift(parsed, peers, NODES[0]) == []
        text = X.text_form(dom, NODES)
        assert 'Node #1   - 127.0.0.3       - READY                - Version: 580.95.05' in text
        assert text.endswith('Domain State: UP\n')
        # A peer whose daemon stops answering (the imex-peer-down fault): UNAVAILABLE, INVALID, RECOVERING.
        daemons[1].stop_serving()
        daemons[0].probe()
        parsed = parse_domain_json(json.dumps(X.domain(NODES, ports[1])))
        assert parsed['status'] == 'DEGRADED'
        assert [n['status'] for n in parsed['nodes']] == ['READY', 'UNAVAILABLE', 'READY']
        assert [c['status'] for c in parsed['nodes'][1]['connections']] == ['INVALID'] * 3
        assert parsed['nodes'][0]['connections'][1]['status'] == 'RECOVERING'
        assert _imex.domain_drift(parsed, peers, NODES[0])[0].startswith('peer n1 (127.0.0.3) is UNAVAILABLE')
        # Back: connected again.
        daemons[1].start_serving()
        daemons[0].probe()
        assert parse_domain_json(json.dumps(X.domain(NODES, ports[1])))['nodes'][0]['connections'][1]['status'] == \
            'CONNECTED'
    finally:
        for one in daemons:
            one.stop_serving()


def test_a_daemon_on_another_node_list_is_a_node_map_mismatch(ports):
    first = daemon(NODES[0], ports, NODES[:2])
    second = daemon(NODES[1], ports, NODES)
    try:
        first.start_serving()
        second.start_serving()
        first.probe()
        second.probe()
        assert first.view()['connections']['1']['status'] == 'NODE_MAP_MISMATCH'
        assert second.view()['connections']['0']['status'] == 'NODE_MAP_MISMATCH'
        assert second.view()['connections']['2']['status'] == 'NEVER_CONNECTED'
    finally:
        first.stop_serving()
        second.stop_serving()


def test_nobody_answers_is_down(ports):
    dom = X.domain(NODES[:2], ports[1])
    assert dom['status'] == 'DOWN'
    assert dom['nodes']['0'] == X._unavailable(NODES[:2], NODES[0])
    assert parse_domain_json(json.dumps(dom))['nodes'][0]['hostname'] == 'N/A'


def test_ctl_without_a_node_list(tmp_path, capsys):
    config = tmp_path / 'config.cfg'
    config.write_text('IMEX_NODE_CONFIG_FILE={0}\nIMEX_CMD_PORT=1\n'.format(tmp_path / 'nodes_config.cfg'))
    assert X.ctl(['-c', str(config), '-N', '-j'], '580.95.05') == 1
    assert capsys.readouterr().out == 'Failed to read node configuration file {0}\n'.format(
        tmp_path / 'nodes_config.cfg')


def test_proc_devices_gets_the_driver_majors_as_linux_gives_them():
    host = 'Character devices:\n  1 mem\n254 gpiochip\n253 tpm0\n\nBlock devices:\n  8 sd\n'
    loaded = gd.proc_devices_text(host, True, nvswitch=True)
    # Dynamic majors: the first free bucket from 254 down (fs/char_dev.c find_dynamic_major).
    assert char_major(loaded, 'nvidia-uvm') == 252
    assert char_major(loaded) == 249
    assert char_major(loaded, 'nvidia-nvswitch') == 248
    assert char_major(loaded, 'nvidia') == 195
    assert loaded.splitlines()[:4] == ['Character devices:', '  1 mem', '195 nvidia', '195 nvidiactl']
    assert loaded.endswith('Block devices:\n  8 sd\n')
    unloaded = gd.proc_devices_text(host, False)
    assert char_major(unloaded) is None and '254 gpiochip' in unloaded
    full = 'Character devices:\n' + ''.join('{0} x{0}\n'.format(m) for m in range(234, 255))
    assert char_major(gd.proc_devices_text(full, True)) == 508


def test_the_gb200_trays_connectx_functions_hang_off_root_ports():
    with open(os.path.join(DOUBLE, 'profiles', 'gb200-4gpu.json')) as handle:
        profile = json.load(handle)
    bridges = gd.pci_switches(profile)
    assert all(int(name[5:7], 16) >= 0 and '-' not in name for name in bridges)
    roots = dict((name, b) for name, b in bridges.items() if name.startswith('0000:00:1'))
    wanted = [('root', 1), ('root', 2), ('root', 3), ('root', 4)]
    assert sorted((b['kind'], b['secondary']) for b in roots.values()) == wanted
    assert gd.bridge_files(profile)
