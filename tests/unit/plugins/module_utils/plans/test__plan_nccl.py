# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/plans/_plan_nccl.py: facts + settings -> the nccl role's plan, its agreement with the readiness
check nccl.config, and idempotence (apply the plan's files, plan again: nothing to do)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import hashlib
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nccl as N
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
CONF = '/etc/nccl.conf'
TORCH = '/etc/profile.d/nodeprep-torch-nccl.sh'
HEADER = ('# Managed by gpufleet.nodeprep (nccl); local changes are overwritten.\n'
          '# gpufleet.nodeprep.nccl: PyTorch ProcessGroupNCCL settings for login shells. Batch systems and containers\n'
          '# that do not start a login shell need them in their own environment.\n')
TIMEOUT_WORDS = ("nodeprep_nccl_conf.NCCL_TIMEOUT: NCCL never reads it; PyTorch's collective timeout is set in code "
                 "(init_process_group(timeout=...))")
NOT_MANAGED = ('not managed: nodeprep_nccl_conf, nodeprep_nccl_socket_networks and nodeprep_nccl_torch_env are '
               'empty')


def state(data, mode='0644', uid=0, gid=0):
    """A gathered file record (gpu_node_facts' nodeprep_files entry) for ``data`` (bytes or text)."""
    raw = data if isinstance(data, bytes) else data.encode('utf-8')
    return {'exists': True, 'type': 'file', 'mode': mode, 'uid': uid, 'gid': gid, 'size': len(raw),
            'sha1': hashlib.sha1(raw).hexdigest(), 'target': None}  # nosec B324 - what gpu_node_facts reports


MISSING = {'exists': False, 'type': None, 'mode': None, 'uid': None, 'gid': None, 'size': None, 'sha1': None,
           'target': None}
NICS = {'eno1': {'addresses': {'ipv4': ['192.168.1.11/24'], 'ipv6': []}, 'driver': {'driver': 'igb'}},
        'ens3f0np0': {'addresses': {'ipv4': ['10.20.0.11/16'], 'ipv6': []}, 'driver': {'driver': 'mlx5_core'}},
        'ens3f1np1': {'addresses': {'ipv4': ['10.20.1.11/16'], 'ipv6': ['fd00::11/64']},
                      'driver': {'driver': 'mlx5_core'}}}


# The PCI scan of an 8-GPU node (the GPU rule, rules/_gpu_node.py, reads it: nccl is a GPU role).
GPU_NODE = {'pci': {'gpu_count': 8}}


def facts(files=None, **extra):
    out = {'nodeprep_gathered': ['nic', 'kernel'], 'nics': copy.deepcopy(NICS), 'kernel_state': GPU_NODE,
           'nodeprep_files': {CONF: MISSING, TORCH: MISSING}}
    out['nodeprep_files'].update(files or {})
    out.update(extra)
    return out


def make_plan(node_facts, given):
    settings, problems = _plans.typed_settings('nccl', given)
    return _plans.plan_role('nccl', node_facts, settings, problems, _plan.new_context(host='gpu-a01'))


def contents(plan):
    return dict((entry['path'], entry['content']) for entry in plan['files'])


def readiness(plan):
    result = _readiness.plan_check('nccl.config', plan)
    return result['status'], result['observed']


# (id, facts, settings as users write them, expected: the plan's keys that are known, and the readiness result)
CASES = [
    # tests/unit/roles/site_reasons.yml's cases for nccl
    ('nothing configured, no file: left alone', facts(), {},
     {'reasons': [], 'run': [], 'files': {}, 'problems': [], 'errors': [],
      'check': ('skip', '/etc/nccl.conf does not exist and nothing is configured')}),
    ('a training network with no interface on it fails the role', facts(),
     {'nodeprep_nccl_socket_networks': ['10.99.0.0/16']},
     {'reasons': [], 'problems': [], 'files': {},
      'errors': ['nodeprep_nccl_socket_networks=["10.99.0.0/16"] matches no interface on gpu-a01; its addresses: '
                 'eno1 192.168.1.11/24; ens3f0np0 10.20.0.11/16; ens3f1np1 10.20.1.11/16, fd00::11/64'],
      'check': ('fail', 'nodeprep_nccl_socket_networks=["10.99.0.0/16"] matches no interface on gpu-a01; its '
                        'addresses: eno1 192.168.1.11/24; ens3f0np0 10.20.0.11/16; ens3f1np1 10.20.1.11/16, '
                        'fd00::11/64')}),
    ('NCCL_SOCKET_IFNAME together with the training network is refused', facts(),
     {'nodeprep_nccl_conf': {'NCCL_SOCKET_IFNAME': 'eth0'}, 'nodeprep_nccl_socket_networks': ['10.99.0.0/16']},
     {'reasons': [], 'errors': [], 'files': {},
      'problems': ['nodeprep_nccl_conf.NCCL_SOCKET_IFNAME="eth0": not together with '
                   'nodeprep_nccl_socket_networks=["10.99.0.0/16"], which derives it (choose one)'],
      'check': ('fail', 'the settings of role nccl are invalid: nodeprep_nccl_conf.NCCL_SOCKET_IFNAME="eth0": not '
                        'together with nodeprep_nccl_socket_networks=["10.99.0.0/16"], which derives it (choose '
                        'one)')}),
    ('an NCCL file to write runs the role', facts(), {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}},
     {'reasons': ['/etc/nccl.conf: missing'], 'problems': [], 'errors': [],
      'files': {CONF: 'NCCL_DEBUG=WARN\n'}, 'check': ('fail', '/etc/nccl.conf: missing')}),
    # the file's states
    ('the file already right: nothing to do', facts({CONF: state('NCCL_DEBUG=WARN\nNCCL_IB_TIMEOUT=22\n')}),
     {'nodeprep_nccl_conf': {'NCCL_IB_TIMEOUT': 22, 'NCCL_DEBUG': 'WARN'}},
     {'reasons': [], 'run': [], 'files': {CONF: 'NCCL_DEBUG=WARN\nNCCL_IB_TIMEOUT=22\n'},
      'check': ('pass', '/etc/nccl.conf: as wanted')}),
    ('the file edited by hand', facts({CONF: state('NCCL_DEBUG=INFO\n')}), {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}},
     {'reasons': ['/etc/nccl.conf: content differs'], 'check': ('fail', '/etc/nccl.conf: content differs')}),
    ('a comment line added by hand (older NCCL reads it)', facts({CONF: state('# NCCL_DEBUG=INFO\nNCCL_DEBUG=WARN\n')}),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}},
     {'reasons': ['/etc/nccl.conf: content differs'], 'files': {CONF: 'NCCL_DEBUG=WARN\n'}}),
    ('a trailing space, which NCCL keeps', facts({CONF: state('NCCL_DEBUG=WARN \n')}),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}}, {'reasons': ['/etc/nccl.conf: content differs']}),
    ('a byte that is not UTF-8: compared by SHA-1, never decoded', facts({CONF: state(b'NCCL_DEBUG=WARN\xe9\n')}),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}},
     {'reasons': ['/etc/nccl.conf: content differs'], 'check': ('fail', '/etc/nccl.conf: content differs')}),
    ('the mode changed', facts({CONF: state('NCCL_DEBUG=WARN\n', mode='0600')}),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}}, {'reasons': ['/etc/nccl.conf: mode 0600, not 0644']}),
    ('the owner changed', facts({CONF: state('NCCL_DEBUG=WARN\n', uid=1000)}),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}}, {'reasons': ['/etc/nccl.conf: uid 1000, not 0']}),
    ('a file too large or unreadable to hash: the task decides',
     facts({CONF: dict(state('x'), sha1=None, size=2 ** 21)}), {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}},
     {'reasons': ['/etc/nccl.conf: content not known (over 1048576 bytes or unreadable)']}),
    ('a directory where the file belongs',
     facts({CONF: dict(MISSING, exists=True, type='directory', mode='0755', uid=0, gid=0)}),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}}, {'reasons': ['/etc/nccl.conf: is a directory, not a file']}),
    ('nothing configured, a file there: left alone and said so', facts({CONF: state('NCCL_DEBUG=INFO\n')}), {},
     {'reasons': [], 'run': [], 'files': {}, 'check': ('pass', '/etc/nccl.conf exists and is left alone')}),
    ('an unmanaged file that is not UTF-8 is left alone', facts({CONF: state(b'\xff\xfe')}), {},
     {'reasons': [], 'files': {}, 'check': ('pass', '/etc/nccl.conf exists and is left alone')}),
    # NCCL_SOCKET_IFNAME from the training network
    ('the training network chooses its interfaces', facts(), {'nodeprep_nccl_socket_networks': ['10.20.0.0/16']},
     {'reasons': ['/etc/nccl.conf: missing'], 'errors': [], 'problems': [],
      'files': {CONF: 'NCCL_SOCKET_IFNAME==ens3f0np0,ens3f1np1\n'}}),
    ('networks given the -e way, comma-separated', facts(),
     {'nodeprep_nccl_socket_networks': '10.20.0.0/24,192.168.1.0/24', 'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}},
     {'problems': [], 'files': {CONF: 'NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME==eno1,ens3f0np0\n'}}),
    ('an IPv6 training network', facts(), {'nodeprep_nccl_socket_networks': ['fd00::/64']},
     {'files': {CONF: 'NCCL_SOCKET_IFNAME==ens3f1np1\n'}}),
    ('a network that is not a CIDR', facts(), {'nodeprep_nccl_socket_networks': ['10.20.0.0/33']},
     {'reasons': [], 'files': {}, 'errors': [],
      'problems': ["nodeprep_nccl_socket_networks[0] '10.20.0.0/33' is not a valid network (CIDR such as "
                   "10.20.0.0/16): '10.20.0.0/33' does not appear to be an IPv4 or IPv6 network (allowed: a list of "
                   "CIDR networks such as 10.20.0.0/16)"]}),
    ('the NIC facts could not be read: the role fails, readiness fails',
     facts(nodeprep_errors={'nic': 'nic facts: ip -j addr show failed'}),
     {'nodeprep_nccl_socket_networks': ['10.20.0.0/16']},
     {'reasons': [], 'files': {},
      'errors': ['the NIC facts of gpu-a01 could not be read, so NCCL_SOCKET_IFNAME for '
                 'nodeprep_nccl_socket_networks=["10.20.0.0/16"] is not known: nic facts: ip -j addr show failed'],
      'check': ('fail', 'the NIC facts of gpu-a01 could not be read, so NCCL_SOCKET_IFNAME for '
                        'nodeprep_nccl_socket_networks=["10.20.0.0/16"] is not known: nic facts: ip -j addr show '
                        'failed')}),
    ('the NIC facts not gathered: missing, readiness fails', facts(nodeprep_gathered=['kernel']),
     {'nodeprep_nccl_socket_networks': ['10.20.0.0/16']},
     {'reasons': [], 'files': {}, 'missing': ['subsets: nic'], 'check': ('fail', 'not gathered: subsets: nic')}),
    ('the file state not gathered: missing', {'nodeprep_gathered': ['kernel'], 'kernel_state': GPU_NODE},
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 1}},
     {'reasons': [], 'files': {}, 'missing': ['files: /etc/nccl.conf'],
      'check': ('fail', 'not gathered: files: /etc/nccl.conf')}),
    # names nothing reads
    ('a name nothing reads: written, reported, readiness warns', facts({CONF: state('NCCL_TIMEOUT=1800\n')}),
     {'nodeprep_nccl_conf': {'NCCL_TIMEOUT': 1800}},
     {'reasons': [], 'problems': [], 'files': {CONF: 'NCCL_TIMEOUT=1800\n'},
      'reports': ['WARNING: written anyway (set nodeprep_nccl_strict=true to refuse): ' + TIMEOUT_WORDS],
      'check': ('warn', '/etc/nccl.conf: as wanted; names nothing reads: ' + TIMEOUT_WORDS)}),
    ('a name nothing reads with nodeprep_nccl_strict', facts(),
     {'nodeprep_nccl_conf': {'NCCL_TIMEOUT': 1800}, 'nodeprep_nccl_strict': True},
     {'reasons': [], 'files': {}, 'reports': [],
      'problems': [TIMEOUT_WORDS + ' (refused: nodeprep_nccl_strict is true)']}),
    ('nodeprep_nccl_strict given as the string "false" (-e) is false', facts(),
     {'nodeprep_nccl_conf': {'NCCL_TIMEOUT': 1800}, 'nodeprep_nccl_strict': 'false'},
     {'problems': [], 'reasons': ['/etc/nccl.conf: missing'], 'files': {CONF: 'NCCL_TIMEOUT=1800\n'}}),
    ('a name given in nodeprep_nccl_extra_names is accepted', facts(),
     {'nodeprep_nccl_conf': {'NCCL_NEW_THING': 1}, 'nodeprep_nccl_extra_names': 'NCCL_NEW_THING',
      'nodeprep_nccl_strict': 'yes'},
     {'problems': [], 'reports': [], 'files': {CONF: 'NCCL_NEW_THING=1\n'}}),
    # values
    ('booleans as 1/0, numbers as written', facts(),
     {'nodeprep_nccl_conf': {'NCCL_IB_DISABLE': False, 'NCCL_P2P_DISABLE': True, 'NCCL_IB_TIMEOUT': 22,
                             'NCCL_BUFFSIZE': 0.5}},
     {'problems': [], 'files': {CONF: 'NCCL_BUFFSIZE=0.5\nNCCL_IB_DISABLE=0\nNCCL_IB_TIMEOUT=22\nNCCL_P2P_DISABLE=1\n'}}),
    ('a null value', facts(), {'nodeprep_nccl_conf': {'NCCL_DEBUG': None}},
     {'reasons': [], 'files': {},
      'problems': ['nodeprep_nccl_conf.NCCL_DEBUG is null; NCCL would read an empty value as unset: remove the name '
                   'or give a value']}),
    ('a value on two lines', facts(), {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN\nNCCL_P2P_DISABLE=1'}},
     {'files': {}, 'problems': ['nodeprep_nccl_conf: values that are not one-line scalars: NCCL_DEBUG (allowed: a '
                                'string, number or boolean on one line)']}),
    ('a name that is not an environment name', facts(), {'nodeprep_nccl_conf': {'nccl-debug': 'WARN'}},
     {'files': {}, 'problems': ['nodeprep_nccl_conf: names that are not environment variable names: nccl-debug '
                                '(allowed: NAME matching [A-Z_][A-Z0-9_]*)']}),
    ('NCCL_CONF_FILE in the file', facts(), {'nodeprep_nccl_conf': {'NCCL_CONF_FILE': '/x'}},
     {'files': {}, 'problems': ['nodeprep_nccl_conf.NCCL_CONF_FILE: NCCL reads it from the environment only, before '
                                'it opens any configuration file (NVIDIA/nccl src/misc/param.cc); set it in the '
                                'environment of the jobs']}),
    ('the conf given as a list', facts(), {'nodeprep_nccl_conf': ['NCCL_DEBUG=WARN']},
     {'files': {}, 'reasons': [],
      'problems': ['nodeprep_nccl_conf=["NCCL_DEBUG=WARN"]: argument \'nodeprep_nccl_conf\' is of type list and we '
                   "were unable to convert to dict: <class 'list'> cannot be converted to a dict (role nccl: "
                   'docs/roles/nccl.md)']}),
    # Ansible lists the valid booleans from a set (its order varies): the message is known up to that list.
    ('nodeprep_nccl_strict junk', facts(), {'nodeprep_nccl_strict': 'maybe'},
     {'files': {}, 'reasons': [],
      'problem_head': ('nodeprep_nccl_strict="maybe": argument \'nodeprep_nccl_strict\' is of type str and we were '
                       "unable to convert to bool: The value 'maybe' is not a valid boolean. Valid booleans include: ",
                       ' (role nccl: docs/roles/nccl.md)')}),
    # the PyTorch file
    ('PyTorch variables: the profile.d file, shell-quoted and sorted', facts(),
     {'nodeprep_nccl_torch_env': {'TORCH_NCCL_ASYNC_ERROR_HANDLING': 3,
                                  'PYTORCH_CUDA_ALLOC_CONF': "expandable_segments:True,it's"}},
     {'reasons': ['/etc/profile.d/nodeprep-torch-nccl.sh: missing'], 'problems': [],
      'files': {TORCH: HEADER + 'export PYTORCH_CUDA_ALLOC_CONF=\'expandable_segments:True,it\'"\'"\'s\'\n'
                                'export TORCH_NCCL_ASYNC_ERROR_HANDLING=3\n'},
      'check': ('fail', '/etc/profile.d/nodeprep-torch-nccl.sh: missing')}),
    ('both files, the conf right and the profile.d file edited',
     facts({CONF: state('NCCL_DEBUG=WARN\n'), TORCH: state(HEADER + 'export TORCH_NCCL_BLOCKING_WAIT=0\n')}),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}, 'nodeprep_nccl_torch_env': {'TORCH_NCCL_BLOCKING_WAIT': True}},
     {'reasons': ['/etc/profile.d/nodeprep-torch-nccl.sh: content differs'],
      'files': {CONF: 'NCCL_DEBUG=WARN\n', TORCH: HEADER + 'export TORCH_NCCL_BLOCKING_WAIT=1\n'},
      'check': ('fail', '/etc/nccl.conf: as wanted; /etc/profile.d/nodeprep-torch-nccl.sh: content differs')}),
    ('PYTORCH_NO_CUDA_MEMORY_CACHING: a debug switch, written with a warning',
     facts({TORCH: state(HEADER + 'export PYTORCH_NO_CUDA_MEMORY_CACHING=0\n')}),
     {'nodeprep_nccl_torch_env': {'PYTORCH_NO_CUDA_MEMORY_CACHING': 0}},
     {'reasons': [], 'files': {TORCH: HEADER + 'export PYTORCH_NO_CUDA_MEMORY_CACHING=0\n'},
      'reports': ['WARNING: written anyway (set nodeprep_nccl_strict=true to refuse): '
                  'nodeprep_nccl_torch_env.PYTORCH_NO_CUDA_MEMORY_CACHING: a debug switch: in several PyTorch '
                  'versions any value, even 0, turns the CUDA caching allocator off'],
      'check': ('warn', '/etc/profile.d/nodeprep-torch-nccl.sh: as wanted; names nothing reads: '
                        'nodeprep_nccl_torch_env.PYTORCH_NO_CUDA_MEMORY_CACHING: a debug switch: in several PyTorch '
                        'versions any value, even 0, turns the CUDA caching allocator off')}),
    ('other paths', facts(files={'/opt/nccl.conf': MISSING}),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}, 'nodeprep_nccl_conf_path': '/opt/nccl.conf'},
     {'reasons': ['/opt/nccl.conf: missing'], 'files': {'/opt/nccl.conf': 'NCCL_DEBUG=WARN\n'}}),
]
IDS = [case[0] for case in CASES]


@pytest.mark.parametrize('name, node_facts, given, expected', CASES, ids=IDS)
def test_plan(name, node_facts, given, expected):
    plan = make_plan(node_facts, given)
    for key, want in expected.items():
        if key == 'files':
            assert contents(plan) == want
        elif key == 'check':
            assert readiness(plan) == want
        elif key == 'problem_head':
            assert len(plan['problems']) == 1
            assert plan['problems'][0].startswith(want[0]) and plan['problems'][0].endswith(want[1])
        else:
            assert plan[key] == want, key


@pytest.mark.parametrize('name, node_facts, given, expected', CASES, ids=IDS)
def test_nothing_to_do_agrees_with_readiness(name, node_facts, given, expected):
    """The role has nothing to do (and nothing to refuse) exactly when readiness does not fail nccl.config."""
    plan = make_plan(node_facts, given)
    idle = not (plan['reasons'] or plan['problems'] or plan['errors'] or plan['missing'])
    assert idle == (readiness(plan)[0] != 'fail')


def apply(node_facts, plan):
    """What the role's copy tasks leave on the node: each planned file with its content, mode and owner root."""
    out = copy.deepcopy(node_facts)
    for entry in plan['files']:
        if entry['change']:
            out['nodeprep_files'][entry['path']] = state(entry['content'], mode=entry['mode'])
    return out


@pytest.mark.parametrize('name, node_facts, given, expected', CASES, ids=IDS)
def test_idempotent(name, node_facts, given, expected):
    plan = make_plan(node_facts, given)
    again = make_plan(apply(node_facts, plan), given)
    assert again['reasons'] == []
    assert _plan.fixable_drift(again) == []
    assert contents(again) == contents(plan)
    if not (plan['problems'] or plan['errors'] or plan['missing']):
        assert readiness(again)[0] in ('pass', 'warn', 'skip')


def test_gather():
    settings, _problems = _plans.typed_settings('nccl', {})
    assert N.gather(settings) == dict(_plan.new_gather(), files=[CONF])
    settings, _problems = _plans.typed_settings('nccl', {'nodeprep_nccl_socket_networks': ['10.20.0.0/16'],
                                                         'nodeprep_nccl_torch_env': {'TORCH_NCCL_HIGH_PRIORITY': 1}})
    assert N.gather(settings) == dict(_plan.new_gather(), files=[CONF, TORCH], subsets=['nic'],
                                      nic_networks=['10.20.0.0/16'])
    # A network that is not one does not reach the gather: every NIC is read, the plan refuses the value.
    settings, _problems = _plans.typed_settings('nccl', {'nodeprep_nccl_socket_networks': ['10.20.0.0/16', 'fabric']})
    assert N.gather(settings) == dict(_plan.new_gather(), files=[CONF], subsets=['nic'])
    assert make_plan(facts({}), {'nodeprep_nccl_socket_networks': ['fabric']})['problems'][0].startswith(
        "nodeprep_nccl_socket_networks[0] 'fabric' is not a valid network")


def test_expected_words():
    plan = make_plan(facts({CONF: state('NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME==ens3f0np0,ens3f1np1\n')}),
                     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}, 'nodeprep_nccl_socket_networks': ['10.20.0.0/16']})
    assert plan['checks'] == {'nccl.config': {
        'expected': '/etc/nccl.conf with NCCL_DEBUG=WARN, NCCL_SOCKET_IFNAME==ens3f0np0,ens3f1np1; only names NCCL '
                    'reads', 'observed': '/etc/nccl.conf: as wanted', 'skip': None}}
    nothing = make_plan(facts(), {})
    assert nothing['checks'] == {'nccl.config': {
        'expected': NOT_MANAGED, 'observed': '', 'skip': '/etc/nccl.conf does not exist and nothing is configured'}}


def test_role_is_flat():
    """No gather_vars.yml or validate.yml, no template rendered a second time (the plan renders both files)."""
    role = os.path.join(ROOT, 'roles', 'nccl')
    assert sorted(os.listdir(role)) == ['README.md', 'defaults', 'meta', 'tasks', 'vars']
    assert sorted(os.listdir(os.path.join(role, 'tasks'))) == ['main.yml', 'work.yml']


# ---------------------------------------------------------------------------------------------------------------------
# Agreement with readiness (tests/unit/plugins/module_utils/plans/agreement.py): for every row of CASES, and for a node
# that is not a GPU node, whether the role has work there, whether it refuses the node, and nccl.config's status.

AGREEMENT_OF = {
    'nothing configured, no file: left alone': (False, False, 'skip'),
    'a training network with no interface on it fails the role': (False, True, 'fail'),
    'NCCL_SOCKET_IFNAME together with the training network is refused': (False, True, 'fail'),
    'an NCCL file to write runs the role': (True, False, 'fail'),
    'the file already right: nothing to do': (False, False, 'pass'),
    'the file edited by hand': (True, False, 'fail'),
    'a comment line added by hand (older NCCL reads it)': (True, False, 'fail'),
    'a trailing space, which NCCL keeps': (True, False, 'fail'),
    'a byte that is not UTF-8: compared by SHA-1, never decoded': (True, False, 'fail'),
    'the mode changed': (True, False, 'fail'),
    'the owner changed': (True, False, 'fail'),
    'a file too large or unreadable to hash: the task decides': (True, False, 'fail'),
    'a directory where the file belongs': (True, False, 'fail'),
    'nothing configured, a file there: left alone and said so': (False, False, 'pass'),
    'an unmanaged file that is not UTF-8 is left alone': (False, False, 'pass'),
    'the training network chooses its interfaces': (True, False, 'fail'),
    'networks given the -e way, comma-separated': (True, False, 'fail'),
    'an IPv6 training network': (True, False, 'fail'),
    'a network that is not a CIDR': (False, True, 'fail'),
    'the NIC facts could not be read: the role fails, readiness fails': (False, True, 'fail'),
    'the NIC facts not gathered: missing, readiness fails': (False, False, 'fail'),
    'the file state not gathered: missing': (False, False, 'fail'),
    'a name nothing reads: written, reported, readiness warns': (False, False, 'warn'),
    'a name nothing reads with nodeprep_nccl_strict': (False, True, 'fail'),
    'nodeprep_nccl_strict given as the string "false" (-e) is false': (True, False, 'fail'),
    'a name given in nodeprep_nccl_extra_names is accepted': (True, False, 'fail'),
    'booleans as 1/0, numbers as written': (True, False, 'fail'),
    'a null value': (False, True, 'fail'),
    'a value on two lines': (False, True, 'fail'),
    'a name that is not an environment name': (False, True, 'fail'),
    'NCCL_CONF_FILE in the file': (False, True, 'fail'),
    'the conf given as a list': (False, True, 'fail'),
    'nodeprep_nccl_strict junk': (False, True, 'fail'),
    'PyTorch variables: the profile.d file, shell-quoted and sorted': (True, False, 'fail'),
    'both files, the conf right and the profile.d file edited': (True, False, 'fail'),
    'PYTORCH_NO_CUDA_MEMORY_CACHING: a debug switch, written with a warning': (False, False, 'warn'),
    'other paths': (True, False, 'fail'),
}
AGREEMENT = [(name, node_facts, given, AGREEMENT_OF[name]) for name, node_facts, given, _expected in CASES] + [
    ('not a GPU node (nodeprep_gpu_node false): nothing, the check skips', facts(),
     {'nodeprep_nccl_conf': {'NCCL_DEBUG': 'WARN'}, 'nodeprep_gpu_node': 'false'}, (False, False, 'skip')),
]


@pytest.mark.parametrize('name, node_facts, given, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_agreement_table(name, node_facts, given, want):
    work, refuses, status = want
    agreement.assert_agrees(name, make_plan(node_facts, given), N.CHECKS, work, refuses, {'nccl.config': status})
