# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/plans/_plan_memlock.py: facts + settings -> the memlock plan (problems, reasons, drift,
files), the readiness checks read from it (agreement), and the idempotence property.

The typing of the settings as users write them (``-e nodeprep_memlock_domains=root``, ``"false"``) is tested where
the controller code lives: tests/unit/plugins/plugin_utils/test__plans_memlock.py.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _memlock
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_memlock as M
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as r
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))

FILE = '/etc/security/limits.d/90-nodeprep-memlock.conf'
SITE = '/etc/security/limits.d/99-site.conf'
SYSD = '/etc/systemd/system.conf.d'
DROPIN = '/etc/systemd/system.conf.d/90-nodeprep-memlock.conf'
SLURMD_DIR = '/etc/systemd/system/slurmd.service.d'
SLURMD = '/etc/systemd/system/slurmd.service.d/90-nodeprep-memlock.conf'
UNL = {'soft': 'unlimited', 'hard': 'unlimited'}
HEADER = '# Managed by gpufleet.nodeprep (memlock); local changes are overwritten.\n'
LIMITS_UNL = HEADER + '*\t-\tmemlock\tunlimited\nroot\t-\tmemlock\tunlimited\n'
MANAGER_UNL = HEADER + '[Manager]\nDefaultLimitMEMLOCK=infinity\n'
SERVICE_UNL = HEADER + '[Service]\nLimitMEMLOCK=infinity\n'
# What community.general.pam_limits wrote for the role before the plan rendered the whole file.
OLD_PAM_LIMITS = ('*\t-\tmemlock\tunlimited\t#managed by gpufleet.nodeprep.memlock\n'
                  'root\t-\tmemlock\tunlimited\t#managed by gpufleet.nodeprep.memlock\n')
NOT_MANAGED_USERS = 'not managed (nodeprep_memlock_limits false)'
NOT_MANAGED_SERVICES = 'not managed (nodeprep_memlock_systemd_default false, no service)'
USERS_UNL = 'memlock soft and hard unlimited for root'
SERVICES_UNL = 'unlimited for systemd DefaultLimitMEMLOCK'


def absent():
    return {'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None, 'size': None, 'sha1': None,
            'target': None}


def a_file(content, mode='0644', uid=0):
    return {'exists': True, 'type': 'file', 'mode': mode, 'uid': uid, 'gid': 0, 'size': len(content),
            'sha1': _plan.sha1_text(content), 'target': None}


def a_dir(mode='0755'):
    return {'exists': True, 'type': 'directory', 'mode': mode, 'uid': 0, 'gid': 0, 'size': 4096, 'sha1': None,
            'target': None}


def defaults(**values):
    settings = dict((name, copy.deepcopy(spec['default'])) for name, spec in M.SETTINGS.items())
    settings.update(values)
    return settings


def converged():
    """The facts of a node the role has converged with its defaults."""
    return {
        'nodeprep_gathered': ['limits', 'files'],
        'nodeprep_errors': {},
        'limits': {
            'flavour': 'upstream', 'errors': [], 'warnings': [], 'no_limits': {},
            'effective': {'root': {'memlock': dict(UNL)}},
            'sources': {'root': {'memlock': {'soft': FILE + ':3', 'hard': FILE + ':3'}}},
            'systemd': {'default': {'memlock': dict(UNL)}, 'default_source': {'memlock': DROPIN + ':3'},
                        'manager': {'memlock': dict(UNL)}, 'services': {}, 'service_errors': {}, 'reason': None,
                        'errors': []},
        },
        'nodeprep_files': {FILE: a_file(LIMITS_UNL), SYSD: a_dir(), DROPIN: a_file(MANAGER_UNL)},
    }


def fresh():
    """A node as delivered: no drop-ins, the kernel's 64 KiB everywhere."""
    facts = converged()
    low = {'soft': 64, 'hard': 64}
    facts['limits']['effective']['root']['memlock'] = dict(low)
    facts['limits']['sources']['root']['memlock'] = {'soft': '/proc/1/limits', 'hard': '/proc/1/limits'}
    facts['limits']['systemd']['default'] = {'memlock': dict(low)}
    facts['limits']['systemd']['default_source'] = {'memlock': 'manager'}
    facts['nodeprep_files'] = {FILE: absent(), SYSD: absent(), DROPIN: absent()}
    return facts


def _set(facts, dotted, value):
    node = facts
    parts = dotted.split('.')
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


def state(base, changes=()):
    facts = base()
    for dotted, value in changes:
        if dotted.startswith('file:'):
            facts['nodeprep_files'][dotted[5:]] = value
        else:
            _set(facts, dotted, value)
    return facts


def missing(path):
    return '{0}: missing'.format(path)


def differs(path):
    return '{0}: content differs'.format(path)


def fixed(msg, check='memlock.users'):
    return {'check': check, 'msg': msg, 'level': 'fail', 'fixable': True}


def unfixable(msg, check='memlock.users', level='fail'):
    return {'check': check, 'msg': msg, 'level': level, 'fixable': False}


SITE_LOWERS = ('user root: memlock soft 64, hard 64, below unlimited: /etc/security/limits.d/99-site.conf:1 wins over '
               '/etc/security/limits.d/90-nodeprep-memlock.conf (pam_limits applies a later file or a more specific '
               'domain last); the role does not edit files it does not own: change or remove that line')
DANGLING = ('limits facts: /etc/security/limits.d/95-gone.conf: cannot read: dangling symlink to /nonexistent; the '
            'effective limits cannot be known')
DROPIN_LOWERS = ('systemd DefaultLimitMEMLOCK soft 64, hard 64, below unlimited: '
                 '/etc/systemd/system.conf.d/99-site.conf:2 wins over '
                 '/etc/systemd/system.conf.d/90-nodeprep-memlock.conf (a later system.conf.d drop-in); the role does '
                 'not edit files it does not own: change or remove that line')
SLURMD_GONE = ("slurmd: not reported (service 'slurmd' not found (LoadState=not-found)); its drop-in is in place")
LIMITS_64K = HEADER + '*\t-\tmemlock\t65536\nroot\t-\tmemlock\t65536\n'
MANAGER_64K = HEADER + '[Manager]\nDefaultLimitMEMLOCK=65536K\n'

# (id, facts, settings, expected): expected has reasons, drift, reports and the checks as (status, observed).
CASES = [
    ('converged node: nothing to do', state(converged), defaults(),
     {'reasons': [], 'drift': [], 'reports': [],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('fresh node: every file to write', state(fresh), defaults(),
     {'reasons': [missing(FILE), missing(SYSD), missing(DROPIN)],
      'drift': [fixed(missing(FILE)), fixed(missing(SYSD), 'memlock.services'),
                fixed(missing(DROPIN), 'memlock.services')],
      'reports': [],
      'checks': {'memlock.users': ('fail', 'root 64/64; ' + missing(FILE)),
                 'memlock.services': ('fail', 'default 64/64; {0}; {1}'.format(missing(SYSD), missing(DROPIN)))}}),
    ('site_reasons: a limit not yet at the wanted value, nothing written yet',
     state(fresh, [('file:' + SYSD, a_dir()), ('file:' + DROPIN, a_file(MANAGER_UNL)),
                   ('limits.systemd.default', {'memlock': dict(UNL)})]), defaults(),
     {'reasons': [missing(FILE)], 'drift': [fixed(missing(FILE))], 'reports': [],
      'checks': {'memlock.users': ('fail', 'root 64/64; ' + missing(FILE)),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('the drop-in the old role wrote with pam_limits is rewritten once', state(converged, [
        ('file:' + FILE, a_file(OLD_PAM_LIMITS))]), defaults(),
     {'reasons': [differs(FILE)], 'drift': [fixed(differs(FILE))], 'reports': [],
      'checks': {'memlock.users': ('fail', 'root unlimited/unlimited; ' + differs(FILE)),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('the drop-in with another mode', state(converged, [('file:' + FILE, a_file(LIMITS_UNL, mode='0600'))]),
     defaults(),
     {'reasons': [FILE + ': mode 0600, not 0644'], 'drift': [fixed(FILE + ': mode 0600, not 0644')], 'reports': [],
      'checks': {'memlock.users': ('fail', 'root unlimited/unlimited; ' + FILE + ': mode 0600, not 0644'),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('a limit higher than wanted is right: the role and readiness agree', state(converged, [
        ('file:' + FILE, a_file(LIMITS_64K)), ('file:' + DROPIN, a_file(MANAGER_64K))]),
     defaults(nodeprep_memlock_value=65536),
     {'reasons': [], 'drift': [], 'reports': [],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('a number given as digits is the same limit', state(converged, [
        ('file:' + FILE, a_file(LIMITS_64K)), ('file:' + DROPIN, a_file(MANAGER_64K)),
        ('limits.effective.root.memlock', {'soft': 65536, 'hard': 65536}),
        ('limits.systemd.default.memlock', {'soft': 65536, 'hard': 65536})]),
     defaults(nodeprep_memlock_value='65536'),
     {'reasons': [], 'drift': [], 'reports': [],
      'checks': {'memlock.users': ('pass', 'root 65536/65536'),
                 'memlock.services': ('pass', 'default 65536/65536')}}),
    ('the role\'s own file holds a larger value than wanted: it writes exactly the wanted one', state(converged),
     defaults(nodeprep_memlock_value=65536),
     {'reasons': [differs(FILE), differs(DROPIN)],
      'drift': [fixed(differs(FILE)), fixed(differs(DROPIN), 'memlock.services')], 'reports': [],
      'checks': {'memlock.users': ('fail', 'root unlimited/unlimited; ' + differs(FILE)),
                 'memlock.services': ('fail', 'default unlimited/unlimited; ' + differs(DROPIN))}}),
    ('a later limits.d file lowers the limit: drift the role cannot fix, naming the file', state(converged, [
        ('limits.effective.root.memlock', {'soft': 64, 'hard': 64}),
        ('limits.sources.root.memlock', {'soft': SITE + ':1', 'hard': SITE + ':1'})]), defaults(),
     {'reasons': [], 'drift': [unfixable(SITE_LOWERS)], 'reports': ['not verified: ' + SITE_LOWERS],
      'checks': {'memlock.users': ('fail', 'root 64/64; ' + SITE_LOWERS),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('a later file lowers the limit, the role\'s verification off: readiness still fails', state(converged, [
        ('limits.effective.root.memlock', {'soft': 64, 'hard': 64}),
        ('limits.sources.root.memlock', {'soft': SITE + ':1', 'hard': SITE + ':1'})]),
     defaults(nodeprep_memlock_verify=False),
     {'reasons': [], 'drift': [unfixable(SITE_LOWERS)], 'reports': [],
      'checks': {'memlock.users': ('fail', 'root 64/64; ' + SITE_LOWERS),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('a dangling limits.d file: the effective limits are not known, memlock.users fails', state(converged, [
        ('limits.errors', ['/etc/security/limits.d/95-gone.conf: cannot read: dangling symlink to /nonexistent'])]),
     defaults(),
     {'reasons': [], 'drift': [unfixable(DANGLING)], 'reports': ['not verified: ' + DANGLING],
      'checks': {'memlock.users': ('fail', 'root unlimited/unlimited; ' + DANGLING),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('an unreadable system.conf.d drop-in fails memlock.services', state(converged, [
        ('limits.errors', [SYSD + '/95-x.conf: cannot read: Permission denied']),
        ('limits.systemd.errors', [SYSD + '/95-x.conf: cannot read: Permission denied'])]), defaults(),
     {'reasons': [],
      'drift': [unfixable('limits facts: ' + SYSD + '/95-x.conf: cannot read: Permission denied; the effective '
                          'limits cannot be known', 'memlock.services')],
      'reports': ['not verified: limits facts: ' + SYSD + '/95-x.conf: cannot read: Permission denied; the '
                  'effective limits cannot be known'],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('fail', 'default unlimited/unlimited; limits facts: ' + SYSD + '/95-x.conf: '
                                      'cannot read: Permission denied; the effective limits cannot be known')}}),
    ('a later system.conf.d drop-in lowers the default', state(converged, [
        ('limits.systemd.default.memlock', {'soft': 64, 'hard': 64}),
        ('limits.systemd.default_source.memlock', SYSD + '/99-site.conf:2')]), defaults(),
     {'reasons': [], 'drift': [unfixable(DROPIN_LOWERS, 'memlock.services')],
      'reports': ['not verified: ' + DROPIN_LOWERS],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('fail', 'default 64/64; ' + DROPIN_LOWERS)}}),
    ('the drop-in is right but the manager was not re-executed', state(converged, [
        ('limits.systemd.default.memlock', {'soft': 64, 'hard': 64}),
        ('limits.systemd.default_source.memlock', 'manager')]), defaults(),
     {'reasons': [],
      'drift': [unfixable('systemd DefaultLimitMEMLOCK soft 64, hard 64, below unlimited (from manager) although '
                          + DROPIN + ' is in place: run systemctl daemon-reexec', 'memlock.services')],
      'reports': ['not verified: systemd DefaultLimitMEMLOCK soft 64, hard 64, below unlimited (from manager) '
                  'although ' + DROPIN + ' is in place: run systemctl daemon-reexec'],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('fail', 'default 64/64; systemd DefaultLimitMEMLOCK soft 64, hard 64, below '
                                      'unlimited (from manager) although ' + DROPIN + ' is in place: run systemctl '
                                      'daemon-reexec')}}),
    ('a service to give its own drop-in', state(converged, [
        ('limits.systemd.services', {'slurmd': {'memlock': {'soft': 64, 'hard': 64}}}),
        ('file:' + SLURMD_DIR, absent()), ('file:' + SLURMD, absent())]),
     defaults(nodeprep_memlock_services=['slurmd.service']),
     {'reasons': [missing(SLURMD_DIR), missing(SLURMD)],
      'drift': [fixed(missing(SLURMD_DIR), 'memlock.services'), fixed(missing(SLURMD), 'memlock.services')],
      'reports': [],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('fail', 'default unlimited/unlimited, slurmd 64/64; {0}; {1}'.format(
                     missing(SLURMD_DIR), missing(SLURMD)))}}),
    ('a service whose drop-in is in place', state(converged, [
        ('limits.systemd.services', {'slurmd': {'memlock': dict(UNL)}}),
        ('file:' + SLURMD_DIR, a_dir()), ('file:' + SLURMD, a_file(SERVICE_UNL))]),
     defaults(nodeprep_memlock_services=['slurmd']),
     {'reasons': [], 'drift': [], 'reports': [],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('pass', 'default unlimited/unlimited, slurmd unlimited/unlimited')}}),
    ('a service that is not installed: its drop-in is in place, readiness warns', state(converged, [
        ('limits.systemd.services', {'slurmd': None}),
        ('limits.systemd.service_errors', {'slurmd': "service 'slurmd' not found (LoadState=not-found)"}),
        ('file:' + SLURMD_DIR, a_dir()), ('file:' + SLURMD, a_file(SERVICE_UNL))]),
     defaults(nodeprep_memlock_services=['slurmd']),
     {'reasons': [], 'drift': [unfixable(SLURMD_GONE, 'memlock.services', 'warn')], 'reports': [],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('warn', 'default unlimited/unlimited, slurmd not reported; ' + SLURMD_GONE)}}),
    ('a service whose drop-in is in place but a later drop-in lowers it', state(converged, [
        ('limits.systemd.services', {'slurmd': {'memlock': {'soft': 64, 'hard': 64}}}),
        ('file:' + SLURMD_DIR, a_dir()), ('file:' + SLURMD, a_file(SERVICE_UNL))]),
     defaults(nodeprep_memlock_services=['slurmd']),
     {'reasons': [],
      'drift': [unfixable('slurmd: LimitMEMLOCK soft 64, hard 64, below unlimited although ' + SLURMD + ' is in '
                          'place: a later drop-in of the unit wins, or the unit was not reloaded (systemctl cat '
                          'slurmd.service; systemctl daemon-reload); the role does not edit files it does not own',
                          'memlock.services')],
      'reports': ['not verified: slurmd: LimitMEMLOCK soft 64, hard 64, below unlimited although ' + SLURMD + ' is '
                  'in place: a later drop-in of the unit wins, or the unit was not reloaded (systemctl cat '
                  'slurmd.service; systemctl daemon-reload); the role does not edit files it does not own'],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('fail', 'default unlimited/unlimited, slurmd 64/64; slurmd: LimitMEMLOCK soft '
                                      '64, hard 64, below unlimited although ' + SLURMD + ' is in place: a later '
                                      'drop-in of the unit wins, or the unit was not reloaded (systemctl cat '
                                      'slurmd.service; systemctl daemon-reload); the role does not edit files it '
                                      'does not own')}}),
    ('systemd not running (a container): memlock.services warns', state(converged, [
        ('limits.systemd.default', {'memlock': None}), ('limits.systemd.manager', None),
        ('limits.systemd.reason', 'this host was not booted with systemd (/run/systemd/system is missing)')]),
     defaults(),
     {'reasons': [],
      'drift': [unfixable('systemd was not asked: this host was not booted with systemd (/run/systemd/system is '
                          'missing)', 'memlock.services', 'warn')],
      'reports': [],
      'checks': {'memlock.users': ('pass', 'root unlimited/unlimited'),
                 'memlock.services': ('warn', 'default unset/unset; systemd was not asked: this host was not booted '
                                      'with systemd (/run/systemd/system is missing)')}}),
    ('a verified user no domain covers', state(converged, [
        ('limits.effective', {'train': {'memlock': {'soft': 64, 'hard': 64}}}),
        ('limits.sources', {'train': {'memlock': {'soft': 'pam_limits default', 'hard': 'pam_limits default'}}}),
        ('file:' + FILE, a_file(HEADER + 'root\t-\tmemlock\tunlimited\n'))]),
     defaults(nodeprep_memlock_domains=['root'], nodeprep_memlock_verify_users=['train']),
     {'reasons': [],
      'drift': [unfixable('user train: memlock soft 64, hard 64, below unlimited (from pam_limits default): no line '
                          'of ' + FILE + ' applies to this user (nodeprep_memlock_domains: root)')],
      'reports': ['not verified: user train: memlock soft 64, hard 64, below unlimited (from pam_limits default): '
                  'no line of ' + FILE + ' applies to this user (nodeprep_memlock_domains: root)'],
      'checks': {'memlock.users': ('fail', 'train 64/64; user train: memlock soft 64, hard 64, below unlimited (from '
                                   'pam_limits default): no line of ' + FILE + ' applies to this user '
                                   '(nodeprep_memlock_domains: root)'),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('a "<domain> -" line sets no limit for the user', state(converged, [
        ('limits.no_limits', {'root': SITE + ':1'}),
        ('limits.effective.root.memlock', {'soft': None, 'hard': None})]), defaults(),
     {'reasons': [],
      'drift': [unfixable('user root: pam_limits sets no limit at all for it (' + SITE + ':1); the role does not '
                          'edit files it does not own: remove that line')],
      'reports': ['not verified: user root: pam_limits sets no limit at all for it (' + SITE + ':1); the role does '
                  'not edit files it does not own: remove that line'],
      'checks': {'memlock.users': ('fail', 'root unset/unset; user root: pam_limits sets no limit at all for it ('
                                   + SITE + ':1); the role does not edit files it does not own: remove that line'),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('no verified user: memlock.users judges the drop-in only', state(converged), defaults(
        nodeprep_memlock_verify_users=[]),
     {'reasons': [], 'drift': [], 'reports': [],
      'checks': {'memlock.users': ('skip', 'nodeprep_memlock_verify_users is empty'),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('PAM limits not managed', state(converged, [('file:' + FILE, absent())]),
     defaults(nodeprep_memlock_limits=False),
     {'reasons': [], 'drift': [], 'reports': [],
      'checks': {'memlock.users': ('skip', NOT_MANAGED_USERS),
                 'memlock.services': ('pass', 'default unlimited/unlimited')}}),
    ('nothing managed', state(fresh), defaults(nodeprep_memlock_limits=False, nodeprep_memlock_systemd_default=False),
     {'reasons': [], 'drift': [], 'reports': [],
      'checks': {'memlock.users': ('skip', NOT_MANAGED_USERS),
                 'memlock.services': ('skip', NOT_MANAGED_SERVICES)}}),
]


def make(facts, settings):
    return _plan.finish(M.plan(copy.deepcopy(facts), settings, _plan.new_context(host='node1')))


def statuses(plan):
    return dict((check, (r.plan_check(check, plan)['status'], r.plan_check(check, plan)['observed']))
                for check in M.CHECKS)


@pytest.mark.parametrize('name, facts, settings, expected', CASES, ids=[c[0] for c in CASES])
def test_plan(name, facts, settings, expected):
    plan = make(facts, settings)
    assert plan['problems'] == []
    assert plan['errors'] == []
    assert plan['reasons'] == expected['reasons']
    assert plan['drift'] == expected['drift']
    assert plan['reports'] == expected['reports']
    assert statuses(plan) == expected['checks']


@pytest.mark.parametrize('name, facts, settings, expected', CASES, ids=[c[0] for c in CASES])
def test_no_reasons_and_no_unfixable_drift_is_readiness_passing(name, facts, settings, expected):
    plan = make(facts, settings)
    checks = [r.plan_check(check, plan)['status'] for check in M.CHECKS]
    unfixable_drift = [item for item in plan['drift'] if not item['fixable']]
    # The reasons to run are exactly the drift a run fixes...
    assert plan['reasons'] == [item['msg'] for item in plan['drift'] if item['fixable']]
    # ... and the checks pass (or do not apply) exactly when there is neither.
    assert (plan['reasons'] == [] and unfixable_drift == []) == all(s in ('pass', 'skip') for s in checks)
    # A check fails exactly when the role's verification would: fail-level drift for it.
    for check in M.CHECKS:
        failing = [item for item in plan['drift'] if item['check'] == check and item['level'] == 'fail']
        assert (r.plan_check(check, plan)['status'] == 'fail') == bool(failing)


def apply(facts, plan):
    """The node after the role wrote the plan's files."""
    facts = copy.deepcopy(facts)
    for entry in plan['files']:
        if entry['state'] == 'file':
            facts['nodeprep_files'][entry['path']] = a_file(entry['content'], mode=entry['mode'])
        else:
            facts['nodeprep_files'][entry['path']] = a_dir(mode=entry['mode'])
    return facts


@pytest.mark.parametrize('name, facts, settings, expected', CASES, ids=[c[0] for c in CASES])
def test_applying_the_plan_leaves_nothing_to_do(name, facts, settings, expected):
    plan = make(facts, settings)
    again = make(apply(facts, plan), settings)
    assert again['reasons'] == []
    assert [item for item in again['drift'] if item['fixable']] == []
    assert [(f['path'], f['change']) for f in again['files']] == [(f['path'], None) for f in plan['files']]


def test_the_files_the_role_writes():
    plan = make(fresh(), defaults(nodeprep_memlock_services=['slurmd', 'docker.service'],
                                  nodeprep_memlock_domains=['*', 'root', '@rdma', '*']))
    assert [(f['path'], f['state'], f['mode'], f['part'], f['service'], f['content']) for f in plan['files']] == [
        (FILE, 'file', '0644', 'limits', None,
         HEADER + '*\t-\tmemlock\tunlimited\nroot\t-\tmemlock\tunlimited\n@rdma\t-\tmemlock\tunlimited\n'),
        (SYSD, 'directory', '0755', 'systemd', None, None),
        (DROPIN, 'file', '0644', 'systemd', None, MANAGER_UNL),
        (SLURMD_DIR, 'directory', '0755', 'service', 'slurmd', None),
        (SLURMD, 'file', '0644', 'service', 'slurmd', SERVICE_UNL),
        ('/etc/systemd/system/docker.service.d', 'directory', '0755', 'service', 'docker', None),
        ('/etc/systemd/system/docker.service.d/90-nodeprep-memlock.conf', 'file', '0644', 'service', 'docker',
         SERVICE_UNL),
    ]


def test_a_number_of_kib_in_every_file():
    plan = make(fresh(), defaults(nodeprep_memlock_value=65536, nodeprep_memlock_services=['slurmd']))
    assert [f['content'] for f in plan['files'] if f['state'] == 'file'] == [
        LIMITS_64K, MANAGER_64K, HEADER + '[Service]\nLimitMEMLOCK=65536K\n']
    assert plan['checks']['memlock.users']['expected'] == 'memlock soft and hard at least 65536 KiB for root'
    assert plan['checks']['memlock.services']['expected'] == ('at least 65536 KiB for systemd DefaultLimitMEMLOCK, '
                                                              'slurmd LimitMEMLOCK')


def test_check_words_of_the_defaults():
    plan = make(converged(), defaults())
    assert plan['checks'] == {
        'memlock.users': {'expected': USERS_UNL, 'observed': 'root unlimited/unlimited', 'skip': None},
        'memlock.services': {'expected': SERVICES_UNL, 'observed': 'default unlimited/unlimited', 'skip': None}}


def test_no_limits_facts_plans_nothing():
    facts = converged()
    del facts['limits']
    plan = make(facts, defaults())
    assert (plan['reasons'], plan['drift'], plan['files']) == ([], [], [])


def test_gather_of_the_defaults():
    assert M.gather(defaults()) == dict(_plan.new_gather(), subsets=['limits'], limits_users=['root'],
                                        files=[FILE, SYSD, DROPIN])


def test_gather_with_services_and_users():
    assert M.gather(defaults(nodeprep_memlock_services=['slurmd.service', 'docker'],
                             nodeprep_memlock_verify_users=['root', 'train'])) == dict(
        _plan.new_gather(), subsets=['limits'], limits_users=['root', 'train'], limits_services=['slurmd', 'docker'],
        files=[FILE, SYSD, DROPIN, SLURMD_DIR, SLURMD, '/etc/systemd/system/docker.service.d',
               '/etc/systemd/system/docker.service.d/90-nodeprep-memlock.conf'])


def test_gather_when_nothing_is_managed():
    assert M.gather(defaults(nodeprep_memlock_limits=False, nodeprep_memlock_systemd_default=False)) == \
        _plan.new_gather()


def test_gather_asks_systemd_about_no_name_that_is_refused():
    assert M.gather(defaults(nodeprep_memlock_services=['slurm d'], nodeprep_memlock_verify_users=['a b'],
                             nodeprep_memlock_value='lots')) == dict(_plan.new_gather(), subsets=['limits'])


VALUE = ('allowed: "unlimited" or a positive number of KiB, as an integer or a string of digits (such as 65536)')
FILE_ALLOWED = ('allowed: a file pam_limits reads, /etc/security/limits.conf or /etc/security/limits.d/<name>.conf '
                '(an absolute path, a name ending in .conf, not hidden)')

# (id, settings, problems): the values as users write them (after typing: a list setting is a list).
BAD = [
    ('value a word', {'nodeprep_memlock_value': 'lots'}, ['nodeprep_memlock_value="lots": ' + VALUE]),
    ('value zero', {'nodeprep_memlock_value': 0}, ['nodeprep_memlock_value=0: ' + VALUE]),
    ('value zero as text', {'nodeprep_memlock_value': '0'}, ['nodeprep_memlock_value="0": ' + VALUE]),
    ('value negative', {'nodeprep_memlock_value': -5}, ['nodeprep_memlock_value=-5: ' + VALUE]),
    ('value -1 (pam_limits would read unlimited)', {'nodeprep_memlock_value': '-1'},
     ['nodeprep_memlock_value="-1": ' + VALUE]),
    ('value a fraction', {'nodeprep_memlock_value': 0.5}, ['nodeprep_memlock_value=0.5: ' + VALUE]),
    ('value true', {'nodeprep_memlock_value': True}, ['nodeprep_memlock_value=true: ' + VALUE]),
    ('value with a unit', {'nodeprep_memlock_value': '64G'}, ['nodeprep_memlock_value="64G": ' + VALUE]),
    ('value infinity (a systemd word)', {'nodeprep_memlock_value': 'infinity'},
     ['nodeprep_memlock_value="infinity": ' + VALUE]),
    ('value empty', {'nodeprep_memlock_value': ''}, ['nodeprep_memlock_value="": ' + VALUE]),
    ('value null', {'nodeprep_memlock_value': None}, ['nodeprep_memlock_value=null: ' + VALUE]),
    ('value too large (pam_limits reads it as unlimited)', {'nodeprep_memlock_value': 2 ** 60},
     ['nodeprep_memlock_value=1152921504606846976: ' + VALUE]),
    ('domain with a space', {'nodeprep_memlock_domains': ['root', 'bad user']},
     ['nodeprep_memlock_domains=["root", "bad user"]: "bad user" is not a domain (allowed: limits.conf(5) domains: '
      'a user, @group, %group, * or %)']),
    ('no domain while the PAM limits are managed', {'nodeprep_memlock_domains': []},
     ['nodeprep_memlock_domains=[]: at least one domain (allowed: limits.conf(5) domains: a user, @group, %group, * '
      'or %); set nodeprep_memlock_limits: false to leave the PAM limits alone']),
    ('service with a space and one with a slash', {'nodeprep_memlock_services': ['slurm d', 'a/b', 'docker']},
     ['nodeprep_memlock_services=["slurm d", "a/b", "docker"]: "slurm d", "a/b" are not a service name (allowed: '
      'systemd service names such as slurmd or docker.service (letters, digits and _ . : @ -; no spaces or '
      'slashes))']),
    ('service only the suffix', {'nodeprep_memlock_services': ['.service']},
     ['nodeprep_memlock_services=[".service"]: ".service" is not a service name (allowed: systemd service names '
      'such as slurmd or docker.service (letters, digits and _ . : @ -; no spaces or slashes))']),
    ('user with a space', {'nodeprep_memlock_verify_users': ['a b']},
     ['nodeprep_memlock_verify_users=["a b"]: "a b" is not a user name (allowed: user names (letters, digits and _ '
      '. -), no spaces)']),
    ('limits file pam_limits never reads', {'nodeprep_memlock_limits_file': '/etc/passwd'},
     ['nodeprep_memlock_limits_file="/etc/passwd": ' + FILE_ALLOWED]),
    ('limits file without .conf', {'nodeprep_memlock_limits_file': '/etc/security/limits.d/90-nodeprep-memlock'},
     ['nodeprep_memlock_limits_file="/etc/security/limits.d/90-nodeprep-memlock": ' + FILE_ALLOWED]),
    ('limits file relative', {'nodeprep_memlock_limits_file': 'limits.d/90-nodeprep-memlock.conf'},
     ['nodeprep_memlock_limits_file="limits.d/90-nodeprep-memlock.conf": ' + FILE_ALLOWED]),
    ('limits file hidden', {'nodeprep_memlock_limits_file': '/etc/security/limits.d/.90-nodeprep.conf'},
     ['nodeprep_memlock_limits_file="/etc/security/limits.d/.90-nodeprep.conf": ' + FILE_ALLOWED]),
    ('two bad values at once', {'nodeprep_memlock_value': 'lots', 'nodeprep_memlock_limits_file': '/etc/passwd'},
     ['nodeprep_memlock_value="lots": ' + VALUE, 'nodeprep_memlock_limits_file="/etc/passwd": ' + FILE_ALLOWED]),
]


@pytest.mark.parametrize('name, values, problems', BAD, ids=[c[0] for c in BAD])
def test_bad_settings_are_problems_and_plan_nothing(name, values, problems):
    plan = make(fresh(), defaults(**values))
    assert plan['problems'] == problems
    assert (plan['reasons'], plan['drift'], plan['files']) == ([], [], [])
    assert plan['run'] == ['invalid settings: ' + '; '.join(problems)]
    for check in M.CHECKS:
        assert r.plan_check(check, plan) == {
            'id': check, 'status': 'fail', 'expected': 'as the memlock role leaves it', 'remedy': r.REMEDIES[check],
            'observed': 'the settings of role memlock are invalid: ' + '; '.join(problems)}


@pytest.mark.parametrize('value, want', [('unlimited', 'unlimited'), (1, 1), ('65536', 65536), (65536, 65536),
                                         (2 ** 53, 2 ** 53)])
def test_wanted_value(value, want):
    assert M.wanted_value(value) == want


@pytest.mark.parametrize('observed, wanted, ok', [
    ('unlimited', 'unlimited', True), (2 ** 40, 'unlimited', False), (None, 'unlimited', False),
    ('unlimited', 64, True), (64, 64, True), (65, 64, True), (63, 64, False), ('64', 64, True), (None, 64, False),
    ('junk', 64, False), (True, 1, False)])
def test_covers_is_the_one_limit_rule(observed, wanted, ok):
    assert _memlock.covers(observed, wanted) is ok


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def test_defaults_and_argument_specs_are_the_settings():
    """SETTINGS is the one source: defaults/main.yml and meta/argument_specs.yml hold exactly it."""
    assert _load('roles', 'memlock', 'defaults', 'main.yml') == dict(
        (name, spec['default']) for name, spec in M.SETTINGS.items())
    options = _load('roles', 'memlock', 'meta', 'argument_specs.yml')['argument_specs']['main']['options']
    assert options == M.SETTINGS


def test_readiness_holds_no_memlock_setting():
    assert [name for name in r.SETTING_NAMES if name.startswith('nodeprep_memlock_')] == []
    from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings
    assert [name for name in _readiness_settings.SETTINGS if name.startswith('nodeprep_memlock_')] == []
    assert dict((check, role) for check, role in r.PLAN_CHECKS.items() if role == 'memlock') == {
        'memlock.users': 'memlock', 'memlock.services': 'memlock'}


# ---------------------------------------------------------------------------------------------------------------------
# Agreement with readiness (tests/unit/plugins/module_utils/plans/agreement.py), over every row of CASES (work: the row's
# reasons; its checks' statuses) and the refusals and missing facts: no fixable drift <=> the check passes, the plan
# refuses => the check fails, what no run changes (a later file that lowers the limit) is named drift.

AGREEMENT = [(name, facts, settings, (bool(expected['reasons']), False,
                                      dict((check, s) for check, (s, _o) in expected['checks'].items())))
             for name, facts, settings, expected in CASES] + [
    ('a value that is not a limit', state(fresh), defaults(nodeprep_memlock_value='lots'),
     (False, True, {'memlock.users': 'fail', 'memlock.services': 'fail'})),
    ('a user the gather did not read', state(converged), defaults(nodeprep_memlock_verify_users=['root', 'train']),
     (False, False, {'memlock.users': 'fail', 'memlock.services': 'fail'})),
]


@pytest.mark.parametrize('name, facts, settings, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_agreement_table(name, facts, settings, want):
    work, refuses, statuses = want
    plan = _plan.plan_with(M, copy.deepcopy(facts), settings, (), _plan.new_context(host='node1'))
    agreement.assert_agrees(name, plan, M.CHECKS, work, refuses, statuses)
