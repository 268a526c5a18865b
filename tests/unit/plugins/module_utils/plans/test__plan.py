# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/plans/_plan.py: the plan's shape, what is still to gather, managed paths."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import hashlib

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan as P


def state(text, mode='0644', uid=0, gid=0):
    return {'exists': True, 'type': 'file', 'mode': mode, 'uid': uid, 'gid': gid, 'size': len(text),
            'sha1': hashlib.sha1(text.encode('utf-8')).hexdigest(), 'target': None}


def test_merge_gathers_keeps_order_and_first_shm_path():
    one = dict(P.new_gather(), subsets=['shm', 'nvidia'], files=['/a'], shm_path='/dev/shm')
    two = dict(P.new_gather(), subsets=['limits', 'shm'], files=['/b', '/a'], shm_path='/other')
    merged = P.merge_gathers([one, two])
    assert merged['subsets'] == ['shm', 'nvidia', 'limits']
    assert merged['files'] == ['/a', '/b']
    assert merged['shm_path'] == '/dev/shm'


def test_missing_facts_of_an_empty_play():
    request = dict(P.new_gather(), subsets=['shm'], units=['nvidia-persistenced'], files=['/etc/nccl.conf'],
                   packages=['dkms'], contents=['/run/x'], limits_users=['root'])
    missing = P.missing_facts(request, {})
    assert missing['subsets'] == ['shm', 'limits']
    assert missing['units'] == ['nvidia-persistenced']
    assert missing['files'] == ['/etc/nccl.conf']
    assert missing['packages'] == ['dkms']
    assert missing['contents'] == ['/run/x']
    assert missing['limits_users'] == ['root']
    assert P.describe_missing(missing) == [
        'subsets: shm, limits', 'units: nvidia-persistenced', 'files: /etc/nccl.conf', 'packages: dkms',
        'contents: /run/x', 'limits_users: root']


def test_nothing_missing_once_gathered():
    request = dict(P.new_gather(), subsets=['shm', 'limits'], units=['nvidia-persistenced'],
                   files=['/etc/nccl.conf', '/etc/x/*.env'], limits_users=['root'], limits_services=['slurmd'])
    facts = {'nodeprep_gathered': ['shm', 'limits', 'units', 'files'], 'shm': {'path': '/dev/shm'},
             'limits': {'effective': {'root': {}}, 'systemd': {'services': {'slurmd': None}}},
             'nodeprep_units': {'nvidia-persistenced.service': {}},
             'nodeprep_files': {'/etc/nccl.conf': P_missing()}, 'nodeprep_file_patterns': ['/etc/x/*.env']}
    assert P.is_empty(P.missing_facts(request, facts))


def P_missing():
    return {'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None, 'size': None, 'sha1': None,
            'target': None}


def test_a_subset_named_gathered_without_its_namespace_is_missing():
    assert P.missing_facts(dict(P.new_gather(), subsets=['shm']), {'nodeprep_gathered': ['shm']})['subsets'] == [
        'shm']


def test_a_glob_not_recorded_is_missing_and_an_unlisted_user_regathers_limits():
    facts = {'nodeprep_gathered': ['limits'], 'limits': {'effective': {'root': {}}}, 'nodeprep_files': {}}
    request = dict(P.new_gather(), files=['/etc/x/*.env'], limits_users=['root', 'alice'])
    missing = P.missing_facts(request, facts)
    assert missing['files'] == ['/etc/x/*.env']
    assert missing['limits_users'] == ['alice']
    assert missing['subsets'] == ['limits']


def test_another_shm_path_regathers_shm():
    facts = {'nodeprep_gathered': ['shm'], 'shm': {'path': '/dev/shm'}}
    assert P.missing_facts(dict(P.new_gather(), subsets=['shm'], shm_path='/run/shm'), facts)['subsets'] == ['shm']


def test_want_path_same_content_is_no_change():
    facts = {'nodeprep_files': {'/etc/nccl.conf': state('A=1\n')}}
    plan = P.new_plan('nccl')
    entry = P.want_path(plan, facts, '/etc/nccl.conf', content='A=1\n', mode='0644', check='nccl.config')
    assert entry['change'] is None
    assert plan['reasons'] == [] and plan['drift'] == []


def test_want_path_other_content_is_drift_and_a_reason():
    facts = {'nodeprep_files': {'/etc/nccl.conf': state('A=2\n')}}
    plan = P.new_plan('nccl')
    entry = P.want_path(plan, facts, '/etc/nccl.conf', content='A=1\n', mode='0644', check='nccl.config')
    assert entry['change'] == '/etc/nccl.conf: content differs'
    assert plan['reasons'] == ['/etc/nccl.conf: content differs']
    assert plan['drift'] == [{'check': 'nccl.config', 'msg': '/etc/nccl.conf: content differs', 'level': 'fail',
                              'fixable': True}]


def test_want_path_not_gathered_is_a_change():
    plan = P.new_plan('nccl')
    assert P.want_path(plan, {}, '/etc/nccl.conf', content='')['change'] == '/etc/nccl.conf: not gathered'
    assert plan['reasons'] == ['/etc/nccl.conf: not gathered']


def test_unfixable_drift_is_no_reason():
    plan = P.new_plan('shm')
    P.add_drift(plan, 'shm.size', '/dev/shm is full', fixable=False)
    P.add_drift(plan, 'shm.size', 'live size not managed', fixable=False, level='warn')
    assert plan['reasons'] == []
    assert P.drift_for(plan, 'shm.size') == ['/dev/shm is full', 'live size not managed']
    assert P.drift_for(plan, 'shm.size', level='warn') == ['live size not managed']
    assert P.fixable_drift(plan) == []


def test_finish_lists_everything_the_role_would_do_or_say():
    plan = P.new_plan('shm')
    P.add_problem(plan, 'nodeprep_shm_size', '64ib', 'allowed: bytes or a number with K, M, G, T or P')
    plan['errors'].append('/dev/shm is not a mounted tmpfs')
    plan['missing'] = ['subsets: shm']
    plan['reports'].append('a larger /dev/shm is kept')
    plan['reasons'].append('fstab: /dev/shm size=64g')
    assert P.finish(plan)['run'] == [
        'invalid settings: nodeprep_shm_size="64ib": allowed: bytes or a number with K, M, G, T or P',
        '/dev/shm is not a mounted tmpfs', 'facts to gather: subsets: shm', 'a larger /dev/shm is kept',
        'fstab: /dev/shm size=64g']
    assert P.finish(P.new_plan('shm'))['run'] == []


def test_managed_line_names_the_role_only():
    assert P.managed_line('nccl') == '# Managed by gpufleet.nodeprep (nccl); local changes are overwritten.'
