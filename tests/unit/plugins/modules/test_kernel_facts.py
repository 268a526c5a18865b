# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible.module_utils import basic

from ansible_collections.gpufleet.nodeprep.plugins.modules import kernel_facts

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ansible_adhoc, run_module

RUNNING = '5.14.0-503.14.1.el9_5.x86_64'


@pytest.fixture
def tree(tmp_path):
    (tmp_path / 'proc/sys/kernel').mkdir(parents=True)
    (tmp_path / 'proc/sys/kernel/osrelease').write_text(RUNNING + u'\n')
    (tmp_path / 'proc/modules').write_text(u'')
    return str(tmp_path)


@pytest.mark.parametrize('license_out, version_out, expected', [
    ('Dual MIT/GPL\n', '570.86.15\n', {'loaded': False, 'version': '570.86.15', 'flavour': 'open', 'source': 'modinfo'}),
    ('NVIDIA\n', '535.161.08\n', {'loaded': False, 'version': '535.161.08', 'flavour': 'proprietary',
                                  'source': 'modinfo'}),
])
def test_modinfo_fallback(tree, capsys, monkeypatch, license_out, version_out, expected):
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, *a, **k: '/usr/sbin/modinfo' if name == 'modinfo' else None)
    base = ('/usr/sbin/modinfo', '-b', tree, '-k', RUNNING, '-F')
    commands = {base + ('license', 'nvidia'): (0, license_out, ''), base + ('version', 'nvidia'): (0, version_out, '')}
    result, seen = run_module(kernel_facts.main, {'root': tree}, capsys, monkeypatch, commands)
    assert seen == [list(base + ('license', 'nvidia')), list(base + ('version', 'nvidia'))]
    assert result['ansible_facts']['kernel_state']['nvidia_module'] == expected


def test_module_not_installed(tree, capsys, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, *a, **k: '/usr/sbin/modinfo' if name == 'modinfo' else None)
    argv = ('/usr/sbin/modinfo', '-b', tree, '-k', RUNNING, '-F', 'license', 'nvidia')
    commands = {argv: (1, '', 'modinfo: ERROR: Module nvidia not found.\n')}
    result, seen = run_module(kernel_facts.main, {'root': tree}, capsys, monkeypatch, commands)
    assert seen == [list(argv)]
    state = result['ansible_facts']['kernel_state']
    assert state['nvidia_module'] == {'loaded': False, 'version': None, 'flavour': None, 'source': None}
    assert state['warnings'] == []


def test_loaded_module_runs_nothing(tree, capsys, monkeypatch):
    os.makedirs(os.path.join(tree, 'proc/driver/nvidia'))
    with open(os.path.join(tree, 'proc/driver/nvidia/version'), 'w') as handle:
        handle.write('NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:42:15 UTC 2024\n')
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: '/usr/bin/' + name)
    result, seen = run_module(kernel_facts.main, {'root': tree}, capsys, monkeypatch)
    assert seen == []
    assert result['ansible_facts']['kernel_state']['nvidia_module']['flavour'] == 'proprietary'


def test_grubby_and_dkms_live(capsys, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, *a, **k: {'grubby': '/usr/sbin/grubby', 'dkms': '/usr/sbin/dkms'}.get(name))
    commands = {
        ('/usr/sbin/grubby', '--default-kernel'): (0, '/boot/vmlinuz-' + RUNNING + '\n', ''),
        ('/usr/sbin/dkms', 'status'): (0, 'nvidia/570.86.15, {0}, x86_64: installed\n'.format(RUNNING), ''),
    }
    result, seen = run_module(kernel_facts.main, {}, capsys, monkeypatch, commands)
    state = result['ansible_facts']['kernel_state']
    assert seen == [['/usr/sbin/grubby', '--default-kernel'], ['/usr/sbin/dkms', 'status']]
    assert state['default'] == RUNNING and state['default_source'] == 'grubby'
    assert state['dkms'][0]['status'] == 'installed'
    assert state['running'] == os.uname()[2]


def test_ansible_adhoc_running_is_uname():
    state = ansible_adhoc('kernel_facts', {})['ansible_facts']['kernel_state']
    assert state['running'] == os.uname()[2]
    assert state['pci']['gpu_count'] == len(state['pci']['gpus'])


def test_root_nonexistent_fails_naming_the_root(tmp_path, capsys, monkeypatch):
    missing = str(tmp_path / 'nonexistent')
    result, seen = run_module(kernel_facts.main, {'root': missing}, capsys, monkeypatch)
    assert result['failed'] is True
    assert result['msg'] == 'root={0} is not a directory; give / or a tree holding proc/sys/kernel/osrelease'.format(
        missing)
    assert 'ansible_facts' not in result
    assert seen == []
