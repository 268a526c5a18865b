# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/collect/_imex_state.py: the imex subset of the gather - files read, the exact argv of
nvidia-imex-ctl with its timeout, and what a failed, hung or unconfigured ctl becomes."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _imex_state as C
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FakeModule

CTL = '/usr/bin/nvidia-imex-ctl'
TIMEOUT = '/usr/bin/timeout'
UP = ('{"nodes": {"0": {"status": "READY", "host": "10.0.0.1", "connections": {"0": {"host": "10.0.0.1", '
      '"status": "CONNECTED", "changed": true}}, "version": "580.95", "hostName": "a"}}, "timestamp": '
      '"1/1/2026 00:00:00.000", "status": "UP"}')


def config(tmp_path, nodes_text='10.0.0.1\n', extra=''):
    nodes = tmp_path / 'nodes_config.cfg'
    if nodes_text is not None:
        nodes.write_text(nodes_text)
    cfg = tmp_path / 'config.cfg'
    cfg.write_text('# IMEX config\nIMEX_NODE_CONFIG_FILE={0}\nIMEX_CMD_ENABLED=1\n{1}'.format(nodes, extra))
    return str(cfg), str(nodes)


def collect(monkeypatch, tmp_path, calls, cfg, devices='Character devices:\n234 nvidia-caps-imex-channels\n',
            tools=None):
    proc = tmp_path / 'devices'
    proc.write_text(devices)
    monkeypatch.setattr(C, 'PROC_DEVICES', str(proc))
    module = FakeModule(tools if tools is not None else {'nvidia-imex-ctl': CTL, 'timeout': TIMEOUT}, calls)
    return C.collect_imex_facts(module, config_path=cfg, timeout=30), module


def test_a_configured_node(monkeypatch, tmp_path):
    cfg, nodes = config(tmp_path)
    facts, module = collect(monkeypatch, tmp_path, [(0, UP, '')], cfg)
    assert module.seen == [[TIMEOUT, '--kill-after=5', '--signal=TERM', '30', CTL, '-c', cfg, '-N', '-j']]
    assert facts['config'] == {'IMEX_NODE_CONFIG_FILE': nodes, 'IMEX_CMD_ENABLED': '1'}
    assert facts['nodes_path'] == nodes and facts['nodes'] == ['10.0.0.1']
    assert facts['nodes_file']['exists'] is True and facts['nodes_file']['sha1']
    assert facts['channels']['major'] == 234
    assert facts['ctl']['domain']['status'] == 'UP' and facts['ctl']['error'] is None
    assert facts['ctl']['rc'] == 0 and facts['ctl']['timed_out'] is False


def test_no_node_list_yet(monkeypatch, tmp_path):
    cfg, nodes = config(tmp_path, nodes_text=None)
    said = 'Failed to read node configuration file {0}\n'.format(nodes)
    facts, _module = collect(monkeypatch, tmp_path, [(1, said, '')], cfg)
    assert facts['nodes'] is None and facts['nodes_file']['exists'] is False
    assert facts['ctl']['not_configured'] is True and facts['ctl']['domain'] is None
    assert facts['ctl']['error'] == 'nvidia-imex-ctl -N -j (rc=1): ' + said.strip()


def test_a_hung_ctl_is_reported(monkeypatch, tmp_path):
    cfg, _nodes = config(tmp_path)
    monkeypatch.setattr(C, 'run', _slow_run)
    facts, _module = collect(monkeypatch, tmp_path, [], cfg)
    assert facts['ctl']['timed_out'] is True
    assert facts['ctl']['error'] == 'nvidia-imex-ctl -N -j did not answer within 30 s'


def _slow_run(module, argv, timeout=None):
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import Result
    return Result(argv, 124, '', '', True)


def test_without_the_package(monkeypatch, tmp_path):
    facts, module = collect(monkeypatch, tmp_path, [], str(tmp_path / 'none.cfg'), devices='Character devices:\n',
                            tools={})
    assert module.seen == []
    assert facts['config'] is None and facts['config_error'] is None
    assert facts['nodes_path'] == '/etc/nvidia-imex/nodes_config.cfg'
    assert facts['channels']['major'] is None
    assert facts['ctl']['ran'] is False and facts['ctl']['error'] == '{0} does not exist'.format(tmp_path / 'none.cfg')


def test_a_config_that_is_not_key_value(monkeypatch, tmp_path):
    cfg = tmp_path / 'config.cfg'
    cfg.write_text('IMEX_CMD_ENABLED 1\n')
    facts, module = collect(monkeypatch, tmp_path, [], str(cfg))
    assert module.seen == []
    assert facts['config_error'] == "{0}: line 1: 'IMEX_CMD_ENABLED 1' is not KEY=value".format(cfg)


def test_ctl_not_installed(monkeypatch, tmp_path):
    cfg, _nodes = config(tmp_path)
    facts, module = collect(monkeypatch, tmp_path, [], cfg, tools={'timeout': TIMEOUT})
    assert module.seen == []
    assert facts['ctl']['error'] == 'nvidia-imex-ctl was not found in PATH (the nvidia-imex package ships it)'


def test_output_that_is_not_json(monkeypatch, tmp_path):
    cfg, _nodes = config(tmp_path)
    facts, _module = collect(monkeypatch, tmp_path, [(0, 'READY\n', '')], cfg)
    assert facts['ctl']['error'] == "nvidia-imex-ctl -N -j (rc=0): not JSON: 'READY'"
    facts, _module = collect(monkeypatch, tmp_path, [(3, UP, '')], cfg)
    assert facts['ctl']['domain']['status'] == 'UP' and facts['ctl']['error'] == 'nvidia-imex-ctl -N -j exited 3'


def test_device_states(tmp_path):
    folder = tmp_path / 'dir'
    folder.mkdir()
    assert C.device_state(str(folder))['type'] == 'directory'
    assert C.device_state(str(tmp_path / 'nothing')) == {'exists': False}
    regular = tmp_path / 'file'
    regular.write_text('x')
    os.chmod(str(regular), 0o640)
    got = C.device_state(str(regular))
    assert (got['type'], got['mode'], got['major']) == ('file', '0640', None)
    # /dev/null: a character device 1:3 on every Linux
    null = C.device_state('/dev/null')
    assert (null['type'], null['major'], null['minor']) == ('char', 1, 3)


def test_an_unreadable_proc_devices(tmp_path):
    got = C.read_channels([0], str(tmp_path / 'missing'))
    assert got['major'] is None and got['error'] == '{0} does not exist'.format(tmp_path / 'missing')
    bad = tmp_path / 'bad'
    bad.write_text('Character devices:\nnot a line\n')
    got = C.read_channels([0], str(bad))
    assert got['error'] == "/proc/devices line 2: 'not a line' is not \"<major> <name>\""
