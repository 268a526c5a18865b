# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil
import subprocess

from ansible.module_utils import basic

from ansible_collections.gpufleet.nodeprep.plugins.modules import shm_facts

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ansible_adhoc, run_module


def test_tree(tmp_path, capsys, monkeypatch):
    (tmp_path / 'proc/self').mkdir(parents=True)
    (tmp_path / 'etc').mkdir()
    shutil.copy(os.path.join(FIXTURES, 'host', 'mountinfo.el9'), str(tmp_path / 'proc/self/mountinfo'))
    shutil.copy(os.path.join(FIXTURES, 'host', 'meminfo.2tib'), str(tmp_path / 'proc/meminfo'))
    shutil.copy(os.path.join(FIXTURES, 'host', 'fstab.el9-shm-64g'), str(tmp_path / 'etc/fstab'))
    result, seen = run_module(shm_facts.main, {'root': str(tmp_path)}, capsys, monkeypatch)
    shm = result['ansible_facts']['shm']
    assert seen == [] and result['changed'] is False
    assert shm['mounted'] is True
    assert shm['size_bytes'] == 2113140480 * 1024 // 2  # no size= on the mount: half of RAM
    assert shm['fstab']['size_bytes'] == 64 * 1024 ** 3
    assert shm['fstab']['options'] == ['defaults', 'size=64g']


def test_bad_fstab_size_is_an_error_of_its_line(tmp_path, capsys, monkeypatch):
    (tmp_path / 'proc/self').mkdir(parents=True)
    (tmp_path / 'etc').mkdir()
    shutil.copy(os.path.join(FIXTURES, 'host', 'mountinfo.el9'), str(tmp_path / 'proc/self/mountinfo'))
    shutil.copy(os.path.join(FIXTURES, 'host', 'fstab.shm-bad-size'), str(tmp_path / 'etc/fstab'))
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, msg, *a, **k: warned.append(msg))
    result, seen = run_module(shm_facts.main, {'root': str(tmp_path)}, capsys, monkeypatch)
    shm = result['ansible_facts']['shm']
    assert not result.get('failed')
    assert len(shm['errors']) == 1
    assert shm['errors'][0].startswith('{0}/etc/fstab line '.format(tmp_path))
    assert ': size=64q: not a tmpfs size' in shm['errors'][0]
    assert shm['fstab']['size_bytes'] is None
    assert warned == shm['errors']


def test_ansible_adhoc_matches_df():
    shm = ansible_adhoc('shm_facts', {})['ansible_facts']['shm']
    df = subprocess.check_output(['df', '-B1', '--output=size,fstype', '/dev/shm']).decode().split()
    assert shm['size_bytes'] == int(df[2])
    assert shm['fstype'] == df[3]
