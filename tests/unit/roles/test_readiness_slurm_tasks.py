# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/readiness/tasks/slurm.yml, imported as roles/readiness/tasks/main.yml imports it, through a real
ansible-playbook: an inventory without the group slurm_head and the default nodeprep_readiness_slurm=report skips it.

Before: ansible-core templated the task's delegate_to (``groups['slurm_head'][0]``) before the import's `when`, so
every readiness run on an inventory without that group failed ("object of type 'dict' has no attribute
'slurm_head'"; molecule's verify on the simulated fleet). With ``drain`` and no controller the role still refuses,
naming both ways to give one.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT, ansible_bin, ansible_env

SLURM = os.path.join(ROOT, 'roles', 'readiness', 'tasks', 'slurm.yml')

PLAY = """- hosts: all
  gather_facts: false
  vars:
    nodeprep_readiness_slurm_controller: ''
  tasks:
    - name: Type the readiness settings once (as roles/readiness/tasks/main.yml does first)
      gpufleet.nodeprep.readiness_info:
        settings_only: true
      run_once: true
      register: __nodeprep_readiness_settings
    - name: Act on the verdict in Slurm (as roles/readiness/tasks/main.yml imports it)
      ansible.builtin.import_tasks: {tasks}
      when: __nodeprep_readiness_settings.settings.nodeprep_readiness_slurm == 'drain'
"""


def run(tmp_path, mode):
    play = tmp_path / 'play.yml'
    play.write_text(PLAY.format(tasks=SLURM))
    return subprocess.run([ansible_bin('ansible-playbook'), '-i', 'localhost,', '-c', 'local', str(play),
                           '-e', 'nodeprep_readiness_slurm=' + mode],
                          cwd=str(tmp_path), env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)


def test_report_skips_without_a_slurm_head_group(tmp_path):
    proc = run(tmp_path, 'report')
    assert proc.returncode == 0, proc.stdout
    assert 'slurm_head' not in proc.stdout.replace('put it in the inventory group slurm_head', '')
    assert 'failed=0' in proc.stdout and 'skipped=3' in proc.stdout, proc.stdout


def test_drain_without_a_controller_is_refused_naming_both_ways(tmp_path):
    proc = run(tmp_path, 'drain')
    assert proc.returncode == 2, proc.stdout
    assert ('nodeprep_readiness_slurm=drain needs the host that runs scontrol: set nodeprep_readiness_slurm_controller '
            'or put it in the inventory group slurm_head') in proc.stdout.replace('\n', ' ').replace('  ', ' ')
