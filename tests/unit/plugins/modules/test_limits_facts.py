# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil

import pytest

from ansible.module_utils import basic

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _limits
from ansible_collections.gpufleet.nodeprep.plugins.modules import limits_facts

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ansible_adhoc, run_module

SYSTEMCTL = '/usr/bin/systemctl'
MANAGER_ARGV = (SYSTEMCTL, 'show', '-p', 'DefaultLimitMEMLOCK', '-p', 'DefaultLimitMEMLOCKSoft',
                '-p', 'DefaultLimitNOFILE', '-p', 'DefaultLimitNOFILESoft')


def service_argv(name):
    return (SYSTEMCTL, 'show', '-p', 'LoadState', '-p', 'LimitMEMLOCK', '-p', 'LimitMEMLOCKSoft',
            '-p', 'LimitNOFILE', '-p', 'LimitNOFILESoft', '--', name)


@pytest.fixture
def el9_tree(tmp_path):
    sec = tmp_path / 'etc/security/limits.d'
    sec.mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, 'host', 'limits.conf.el9'), str(tmp_path / 'etc/security/limits.conf'))
    shutil.copy(os.path.join(FIXTURES, 'host', 'limits.d.el9', '20-nproc.conf'), str(sec / '20-nproc.conf'))
    (sec / '90-nodeprep.conf').write_text(u'*\t-\tmemlock\tunlimited\n@gpu\thard\tnofile\t1048576\n')
    (tmp_path / 'etc/passwd').write_text(u'root:x:0:0:root:/root:/bin/bash\ntrain:x:1000:1000::/home/train:/bin/bash\n')
    (tmp_path / 'etc/group').write_text(u'root:x:0:\ntrain:x:1000:\ngpu:x:2000:train\n')
    (tmp_path / 'etc/systemd/system.conf.d').mkdir(parents=True)
    (tmp_path / 'etc/systemd/system.conf.d/90-memlock.conf').write_text(u'[Manager]\nDefaultLimitMEMLOCK=infinity\n')
    return str(tmp_path)


def test_tree_el9(el9_tree, capsys, monkeypatch):
    result, seen = run_module(limits_facts.main, {'root': el9_tree, 'users': ['root', 'train'],
                                                  'services': ['slurmd']}, capsys, monkeypatch)
    facts = result['ansible_facts']['limits']
    assert seen == []
    assert result['changed'] is False
    assert facts['flavour'] == 'upstream'
    assert facts['effective']['train']['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited'}
    assert facts['effective']['train']['nofile'] == {'soft': None, 'hard': 1048576}
    assert facts['effective']['train']['nproc'] == {'soft': 4096, 'hard': None}
    assert facts['effective']['root']['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited'}
    assert facts['effective']['root']['nproc'] == {'soft': 'unlimited', 'hard': None}
    assert facts['entries'][-1] == {'file': os.path.join(el9_tree, 'etc/security/limits.d/90-nodeprep.conf'),
                                    'line': 2, 'domain': '@gpu', 'type': 'hard', 'item': 'nofile', 'value': 1048576}
    assert facts['systemd']['default']['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited'}
    assert facts['systemd']['services'] == {'slurmd': None}
    assert facts['systemd']['reason'] == 'root is {0}: systemd is not asked about a tree'.format(el9_tree)


def test_systemd_services(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(_limits, 'systemd_booted', lambda: True)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **k: '/usr/bin/' + name)
    commands = {
        MANAGER_ARGV: (0, 'DefaultLimitMEMLOCK=8388608\nDefaultLimitMEMLOCKSoft=8388608\n'
                          'DefaultLimitNOFILE=524288\nDefaultLimitNOFILESoft=1024\n', ''),
        service_argv('slurmd.service'): (0, 'LoadState=loaded\nLimitMEMLOCK=infinity\nLimitMEMLOCKSoft=infinity\n'
                                            'LimitNOFILE=131072\nLimitNOFILESoft=131072\n', ''),
        service_argv('nope.service'): (0, 'LoadState=not-found\nLimitMEMLOCK=8388608\nLimitMEMLOCKSoft=8388608\n'
                                          'LimitNOFILE=524288\nLimitNOFILESoft=1024\n', ''),
    }
    result, seen = run_module(limits_facts.main, {'services': ['slurmd.service', 'nope.service']},
                              capsys, monkeypatch, commands)
    systemd = result['ansible_facts']['limits']['systemd']
    assert seen == [list(MANAGER_ARGV), list(service_argv('slurmd.service')), list(service_argv('nope.service'))]
    assert systemd['manager']['memlock'] == {'soft': 8192, 'hard': 8192}
    assert systemd['services']['slurmd.service'] == {'memlock': {'soft': 'unlimited', 'hard': 'unlimited'},
                                                     'nofile': {'soft': 131072, 'hard': 131072}}
    assert systemd['services']['nope.service'] is None
    assert systemd['service_errors']['nope.service'] == "service 'nope.service' not found (LoadState=not-found)"


def test_no_systemd_no_command(capsys, monkeypatch):
    monkeypatch.setattr(_limits, 'systemd_booted', lambda: False)
    result, seen = run_module(limits_facts.main, {'services': ['ssh']}, capsys, monkeypatch)
    systemd = result['ansible_facts']['limits']['systemd']
    assert seen == []
    assert systemd['services'] == {'ssh': None}
    assert systemd['reason'] == 'this host was not booted with systemd (/run/systemd/system is missing)'


def test_unknown_user_fails(capsys, monkeypatch):
    result, seen = run_module(limits_facts.main, {'users': ['no-such-user-x']}, capsys, monkeypatch)
    assert result['failed'] is True
    assert result['msg'] == ("user 'no-such-user-x' given in users does not exist on this host (pwd lookup failed); "
                             "pass its groups in 'groups' to evaluate it anyway")


def test_groups_option(capsys, monkeypatch, el9_tree):
    result, seen = run_module(limits_facts.main, {'root': el9_tree, 'users': ['newbie'],
                                                  'groups': {'newbie': {'uid': 1500, 'gid': 1500, 'groups': ['gpu']}}},
                              capsys, monkeypatch)
    assert result['ansible_facts']['limits']['effective']['newbie']['nofile'] == {'soft': None, 'hard': 1048576}


@pytest.fixture
def debian_tree(tmp_path):
    """A Debian 12 host: its stock limits.conf (no memlock line) and PID 1's limits under systemd 252."""
    (tmp_path / 'etc/security/limits.d').mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, 'host', 'limits.conf.debian12'), str(tmp_path / 'etc/security/limits.conf'))
    (tmp_path / 'etc/debian_version').write_text(u'12.8\n')
    (tmp_path / 'proc/1').mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, 'host', 'proc1-limits.systemd252'), str(tmp_path / 'proc/1/limits'))
    (tmp_path / 'etc/passwd').write_text(u'root:x:0:0:root:/root:/bin/bash\n')
    (tmp_path / 'etc/group').write_text(u'root:x:0:\n')
    return str(tmp_path)


def test_debian_root_starts_from_pid1_limits(debian_tree, capsys, monkeypatch):
    """Debian's pam_limits: with no memlock line, root's session gets PID 1's limit (8388608 bytes = 8192 KiB in
    the fixture's "Max locked memory" line), not the calling process's."""
    result, seen = run_module(limits_facts.main, {'root': debian_tree, 'users': ['root']}, capsys, monkeypatch)
    facts = result['ansible_facts']['limits']
    assert seen == []
    assert facts['flavour'] == 'debian'
    assert [e for e in facts['entries'] if e['item'] == 'memlock'] == []
    assert facts['effective']['root']['memlock'] == {'soft': 8192, 'hard': 8192}
    assert facts['sources']['root']['memlock']['soft'] == '/proc/1/limits'


def test_ansible_adhoc():
    result = ansible_adhoc('limits_facts', {'users': ['root']})
    assert result['changed'] is False
    assert 'memlock' in result['ansible_facts']['limits']['effective']['root']
