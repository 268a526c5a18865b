# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/imex/files/nodeprep-imex-channels, the script nodeprep-imex-channels.service runs at every boot: the major
from /proc/devices (the same reading as the gather's parser), mknod with mode 0666, a wrong node made again, the
driver loaded once when it has not registered the device."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.machinery
import importlib.util
import os
import stat

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import char_major

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SCRIPT = os.path.join(ROOT, 'roles', 'imex', 'files', 'nodeprep-imex-channels')
DEVICES = 'Character devices:\n  1 mem\n195 nvidia\n235 nvidia-caps-imex-channels\n\nBlock devices:\n  8 sd\n'


@pytest.fixture
def script(monkeypatch, tmp_path):
    loader = importlib.machinery.SourceFileLoader('nodeprep_imex_channels', SCRIPT)
    spec = importlib.util.spec_from_loader('nodeprep_imex_channels', loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    made = {}

    def mknod(path, mode, device):
        made[path] = (mode, os.major(device), os.minor(device))
        with open(path, 'w'):
            pass

    monkeypatch.setattr(module.os, 'mknod', mknod)
    monkeypatch.setattr(module.os, 'chown', lambda path, uid, gid: None)
    monkeypatch.setattr(module, 'is_right', lambda path, major, minor: made.get(path) == (
        stat.S_IFCHR | 0o666, major, minor))
    module.made = made
    return module


def devices(tmp_path, text=DEVICES):
    path = tmp_path / 'devices'
    path.write_text(text)
    return str(path)


def test_the_same_major_as_the_gather(tmp_path, script):
    for text in (DEVICES, 'Character devices:\n234 nvidia-caps-imex-channels\n', 'Character devices:\n  1 mem\n',
                 'Block devices:\n234 nvidia-caps-imex-channels\n'):
        assert script.read_major(devices(tmp_path, text)) == char_major(text)


def test_makes_channel0_with_the_registered_major(tmp_path, script, capsys):
    folder = tmp_path / 'nvidia-caps-imex-channels'
    rc = script.main(['--devices', devices(tmp_path), '--dev-dir', str(folder), '0'])
    assert rc == 0
    assert script.made == {str(folder / 'channel0'): (stat.S_IFCHR | 0o666, 235, 0)}
    assert stat.S_IMODE(os.stat(str(folder)).st_mode) == 0o755
    assert capsys.readouterr().out == 'nodeprep-imex-channels: {0}/channel0 char 235:0 made\n'.format(folder)
    # Already right: nothing made again.
    assert script.main(['--devices', devices(tmp_path), '--dev-dir', str(folder), '0']) == 0
    assert capsys.readouterr().out.endswith('char 235:0 ok\n')


def test_a_node_of_an_earlier_major_is_made_again(tmp_path, script):
    folder = tmp_path / 'chan'
    folder.mkdir()
    (folder / 'channel0').write_text('stale')
    script.made[str(folder / 'channel0')] = (stat.S_IFCHR | 0o666, 234, 0)
    assert script.main(['--devices', devices(tmp_path), '--dev-dir', str(folder), '0']) == 0
    assert script.made[str(folder / 'channel0')] == (stat.S_IFCHR | 0o666, 235, 0)


def test_loads_the_driver_once_then_gives_up(tmp_path, script, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(script.subprocess, 'call', lambda argv: calls.append(argv) or 0)
    path = devices(tmp_path, 'Character devices:\n  1 mem\n')
    assert script.main(['--devices', path, '--dev-dir', str(tmp_path / 'c'), '0']) == 1
    assert calls == [['modprobe', 'nvidia']]
    assert capsys.readouterr().err == ('nodeprep-imex-channels: {0} has no nvidia-caps-imex-channels line: the NVIDIA '
                                       'driver is not loaded (or too old for IMEX channels)\n'.format(path))
    assert script.made == {}


@pytest.mark.parametrize('argv, message', [
    ([], 'nodeprep-imex-channels: no channel number given\n'),
    (['zero'], "nodeprep-imex-channels: 'zero' is not a channel number (usage: nodeprep-imex-channels [--devices "
               "PATH] [--dev-dir DIR] MINOR...)\n"),
])
def test_bad_arguments(script, capsys, argv, message):
    assert script.main(argv) == 2
    assert capsys.readouterr().err == message
