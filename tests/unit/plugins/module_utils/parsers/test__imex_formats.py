# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/parsers/_imex_formats.py on public IMEX outputs (each names its source) and hostile input."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _imex_formats as P

# nvidia-imex-ctl -N -j as NVIDIA's DCGM tests carry it, "the exact JSON format from the original specification"
# (NVIDIA/DCGM dcgmlib/src/tests/DcgmImexManagerTests.cpp, commit 72fa3feaa67d716a75323a8f47c34ff3ee73f824): a
# DEGRADED domain of driver 580.30, two of its nodes, tabs as printed there.
DCGM_SPEC = ('{"nodes":{\n'
             '\t"3": {"status":"READY","host":"10.76.186.255",\n'
             '\t\t"connections":{"1":{"host":"10.76.183.30","status":"CONNECTED","changed":true},\n'
             '\t\t\t"6":{"host":"10.76.190.23","status":"CONNECTED","changed":true}\n'
             '\t\t},\n'
             '\t\t"changed":true,\n'
             '\t\t"version":"580.30",\n'
             '\t\t"hostName":""},\n'
             '\t"1":{"status":"READY","host":"10.76.183.30",\n'
             '\t\t"connections":{"0":{"host":"10.76.179.115","status":"CONNECTED","changed":true},\n'
             '\t\t"1":{"host":"10.76.183.30","status":"CONNECTED","changed":true}},\n'
             '\t\t"changed":true,"version":"580.30","hostName":""}},\n'
             '\t"timestamp":"5/22/2025 19:46:40.891",\n'
             '\t"status":"DEGRADED"}')
# The DOWN domain of a version-mismatched daemon, "real payload shape", schema "confirmed live against nvidia-imex-ctl
# -N -j -H" (NVIDIA/ai-cloud-validation isvctl/tests/test_aws_network_scripts.py, test_imex_parse_down_domain_...):
# every node UNAVAILABLE, every connection INVALID, keys in no particular order.
ISV_DOWN = ('{"nodes": {"1": {"status": "UNAVAILABLE", "host": "10.0.0.2", "connections": {'
            '"0": {"host": "10.0.0.1", "status": "INVALID", "changed": false}, '
            '"1": {"host": "10.0.0.2", "status": "INVALID", "changed": false}}, "hostName": "N/A"}, '
            '"0": {"status": "UNAVAILABLE", "host": "10.0.0.1", "connections": {'
            '"1": {"host": "10.0.0.2", "status": "INVALID", "changed": false}, '
            '"0": {"host": "10.0.0.1", "status": "INVALID", "changed": false}}, "hostName": "gpu-node-a"}}, '
            '"timestamp": "9/4/2026 00:00:00.000", "status": "DOWN"}')


def test_the_specification_sample():
    domain = P.parse_domain_json(DCGM_SPEC)
    assert domain['status'] == 'DEGRADED'
    assert domain['timestamp'] == '5/22/2025 19:46:40.891'
    assert [(n['index'], n['host'], n['status'], n['version'], n['hostname']) for n in domain['nodes']] == [
        (1, '10.76.183.30', 'READY', '580.30', ''), (3, '10.76.186.255', 'READY', '580.30', '')]
    assert domain['nodes'][1]['connections'] == [{'index': 1, 'host': '10.76.183.30', 'status': 'CONNECTED'},
                                                 {'index': 6, 'host': '10.76.190.23', 'status': 'CONNECTED'}]


def test_a_down_domain_in_index_order():
    domain = P.parse_domain_json(ISV_DOWN)
    assert domain['status'] == 'DOWN'
    assert [(n['index'], n['host'], n['status'], n['hostname']) for n in domain['nodes']] == [
        (0, '10.0.0.1', 'UNAVAILABLE', 'gpu-node-a'), (1, '10.0.0.2', 'UNAVAILABLE', 'N/A')]
    assert [c['status'] for n in domain['nodes'] for c in n['connections']] == ['INVALID'] * 4
    assert [c['index'] for c in domain['nodes'][0]['connections']] == [0, 1]


def test_text_around_the_json_and_lower_case_words():
    domain = P.parse_domain_json('note: something\n{"nodes": {"0": {"status": "ready", "host": "10.0.0.1"}}, '
                                 '"status": "up"}\n')
    assert domain['status'] == 'UP' and domain['nodes'][0]['status'] == 'READY'
    assert domain['nodes'][0]['connections'] == [] and domain['nodes'][0]['version'] == ''


@pytest.mark.parametrize('text, message', [
    ('', "not JSON: ''"),
    ('Failed to read node configuration file /etc/nvidia-imex/nodes_config.cfg',
     "not JSON: 'Failed to read node configuration file /etc/nvidia-imex/nodes_config.cfg'"),
    ('[]', 'expected a JSON object, got list'),
    ('{"nodes": []}', '"nodes" is list, not an object of nodes by index'),
    ('{"status": "UP"}', '"nodes" is missing, not an object of nodes by index'),
    ('{"nodes": {"a": {}}, "status": "UP"}', "nodes: 'a' is not a node index"),
    ('{"nodes": {"0": "x"}, "status": "UP"}', 'nodes.0 is not an object'),
    ('{"nodes": {"0": {"connections": []}}, "status": "UP"}', 'nodes.0.connections is not an object'),
    ('{"nodes": {"0": {"connections": {"1": 3}}}, "status": "UP"}', 'nodes.0.connections.1 is not an object'),
    ('{"nodes": {}, "status": null}', "the domain \"status\" is None, not a word such as UP"),
])
def test_what_is_not_the_domain_json(text, message):
    with pytest.raises(P.ImexError) as exc:
        P.parse_domain_json(text)
    assert str(exc.value) == message


# The keys and defaults NVIDIA documents (IMEX guide, "IMEX Service Config Options"); the lines of the packaged file
# as NVIDIA/k8s-dra-driver-gpu templates/compute-domain-daemon-config.tmpl.cfg carries them.
CONFIG = """#   Default Value: 50000
SERVER_PORT=50000

#   Description: Name of file containing IP addresses of nodes
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
IMEX_CMD_ENABLED=1
IMEX_CMD_BIND_INTERFACE_IP=
IMEX_CMD_PORT=50005
"""


def test_config():
    values = P.parse_config(CONFIG)
    assert values == {'SERVER_PORT': '50000', 'IMEX_NODE_CONFIG_FILE': '/etc/nvidia-imex/nodes_config.cfg',
                      'IMEX_CMD_ENABLED': '1', 'IMEX_CMD_BIND_INTERFACE_IP': '', 'IMEX_CMD_PORT': '50005'}
    assert P.nodes_config_path(values) == '/etc/nvidia-imex/nodes_config.cfg'
    assert P.config_port(values, 'IMEX_CMD_PORT', 1) == 50005
    assert P.config_port(values, 'IMEX_CMD_BIND_INTERFACE_IP', 7) == 7
    assert P.nodes_config_path({'IMEX_NODE_CONFIG_FILE': ' '}) == P.NODES_CONFIG_PATH
    assert P.nodes_config_path(None) == P.NODES_CONFIG_PATH
    assert P.parse_config('A=1\nA=2 \n') == {'A': '2'}


@pytest.mark.parametrize('text, message', [
    ('SERVER_PORT 50000', "line 1: 'SERVER_PORT 50000' is not KEY=value"),
    ('\n=1', "line 2: '=1' is not KEY=value"),
    ('1X=2', "line 1: '1X=2' is not KEY=value"),
])
def test_config_lines_that_are_not_key_value(text, message):
    with pytest.raises(P.ImexError) as exc:
        P.parse_config(text)
    assert str(exc.value) == message


@pytest.mark.parametrize('value, message', [
    ('x', "SERVER_PORT='x' is not a port number"),
    ('0', 'SERVER_PORT=0 is not a port number (1-65535)'),
    ('65536', 'SERVER_PORT=65536 is not a port number (1-65535)'),
])
def test_ports(value, message):
    with pytest.raises(P.ImexError) as exc:
        P.config_port({'SERVER_PORT': value}, 'SERVER_PORT', 50000)
    assert str(exc.value) == message


def test_nodes_config_keeps_the_order():
    # The Crusoe Cloud guide's example of nodes_config.cfg: one address a line.
    assert P.parse_nodes_config('172.27.58.70\n172.27.58.71\n\n# spare\n 172.27.58.72 \n') == [
        '172.27.58.70', '172.27.58.71', '172.27.58.72']
    assert P.parse_nodes_config('') == []


# /proc/devices as NVIDIA's CUDA programming guide shows it on an IMEX node (its lines), in the kernel's layout
# (fs/proc/devices.c: a "Character devices:" and a "Block devices:" section).
PROC_DEVICES = """Character devices:
  1 mem
195 nvidia
195 nvidiactl
234 nvidia-caps-imex-channels
509 nvidia-nvswitch

Block devices:
234 nvidia-caps-imex-channels-block-lookalike
"""


def test_the_channel_major():
    assert P.char_major(PROC_DEVICES) == 234
    assert P.char_major(PROC_DEVICES, 'nvidia-nvswitch') == 509
    assert P.char_major('Character devices:\n  1 mem\n') is None
    assert P.char_major('Block devices:\n234 nvidia-caps-imex-channels\n') is None
    assert P.channel_path(0) == '/dev/nvidia-caps-imex-channels/channel0'


def test_a_character_line_that_is_not_major_name():
    with pytest.raises(P.ImexError) as exc:
        P.char_major('Character devices:\n  1 mem\nx y z\n')
    assert str(exc.value) == "/proc/devices line 3: 'x y z' is not \"<major> <name>\""
