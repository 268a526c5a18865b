# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The kernel role's plan (see _plan.py): its settings, what it gathers, and whether it has work on a node.

The decision is _kernel.kernel_work (the same function the role's site reasons called before); this module gives it
the typed settings and the per-OS constants of roles/kernel/vars/<os>.yml (OS_VARS below; a unit test keeps the two
equal), so that neither site.yml nor the plan needs the role's include_vars.
Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._kernel import kernel_work, os_facts

ROLE = 'kernel'
# The readiness checks whose verdict is this plan (none yet: kernel.devel_matched still reads the facts).
CHECKS = ()

# The per-OS constants of roles/kernel/vars/<name>.yml that the decision reads, by file name (chosen like the
# role's first_found chain: distribution_version, distribution_major_version, distribution, os_family, default).
# `{distribution_version}` in a package name stands for that OS fact.
OS_VARS = {
    'RedHat': {
        'family': 'el',
        'sources': ['distro', 'elrepo-lt', 'elrepo-ml'],
        'image_packages': {'distro': ['kernel', 'kernel-core'], 'elrepo-lt': ['kernel-lt', 'kernel-lt-core'],
                           'elrepo-ml': ['kernel-ml', 'kernel-ml-core']},
        'devel_meta_packages': {'distro': [], 'elrepo-lt': ['kernel-lt-devel'], 'elrepo-ml': ['kernel-ml-devel']},
    },
    'Debian': {
        'family': 'debian',
        'sources': ['distro'],
        'image_packages': {'distro': []},
        'devel_meta_packages': {'distro': []},
    },
    'Ubuntu': {
        'family': 'debian',
        'sources': ['distro', 'hwe'],
        'image_packages': {'distro': [], 'hwe': ['linux-generic-hwe-{distribution_version}']},
        'devel_meta_packages': {'distro': [], 'hwe': []},
    },
    'default': {
        'family': 'unsupported',
        'sources': [],
        'image_packages': {},
    },
}

# ELRepo's kernel repository when nodeprep_kernel_elrepo_url is empty.
ELREPO_URL = 'https://elrepo.org/linux/kernel/el{major}/{arch}/'

SETTINGS = {
    'nodeprep_kernel_source': {
        'type': 'str',
        'choices': ['distro', 'hwe', 'elrepo-lt', 'elrepo-ml'],
        'default': 'distro',
        'description': [
            'Where the kernel comes from.',
            ("V(distro) is the distribution's kernel (EL C(kernel), Ubuntu C(linux-generic), Debian "
             'C(linux-image-amd64)).'),
            "V(hwe) is Ubuntu's hardware enablement kernel (C(linux-generic-hwe-<release>)); Ubuntu only.",
            ("V(elrepo-lt) is ELRepo's long-term kernel C(kernel-lt); EL 8 and 9 only (ELRepo has no kernel-lt for "
             'EL 10, the role refuses it there).'),
            "V(elrepo-ml) is ELRepo's mainline kernel C(kernel-ml); EL 8, 9 and 10.",
        ],
    },
    'nodeprep_kernel_manage_devel': {
        'type': 'bool',
        'default': True,
        'description': [
            ('Install the devel/headers package of exactly the kernel that boots next (EL8 C(kernel-devel-uname-r = '
             '<release>), EL9/10 C(kernel-devel-matched-<release>), ELRepo C(kernel-lt-devel)/C(kernel-ml-devel) of '
             'that release, Debian/Ubuntu C(linux-headers-<release>)).'),
        ],
    },
    'nodeprep_kernel_set_default': {
        'type': 'bool',
        'default': True,
        'description': [
            'EL only. Make the chosen kernel the default boot entry (C(grubby --set-default)).',
            ('A distro kernel that already boots next is kept even when a newer distro kernel is installed; '
             'otherwise the newest installed kernel of the chosen source is chosen.'),
        ],
    },
    'nodeprep_kernel_elrepo_url': {
        'type': 'str',
        'default': '',
        'description': [
            ('Base URL of the ELRepo kernel repository (C(.../elrepo/kernel/el<major>/<arch>/)). Used by the elrepo '
             'sources.'),
            ("The role writes the repository C(elrepo-kernel) disabled (as ELRepo's own release package does) and "
             'enables it for its own transactions only.'),
            'Empty (the default) means C(https://elrepo.org/linux/kernel/el<major>/<arch>/).',
        ],
    },
    'nodeprep_kernel_elrepo_gpgcheck': {
        'type': 'bool',
        'default': True,
        'description': [
            'Check the signatures of ELRepo packages.',
        ],
    },
    'nodeprep_kernel_elrepo_gpgkey': {
        'type': 'list',
        'elements': 'str',
        'default': [],
        'description': [
            "URLs of ELRepo's signing keys.",
            ('Empty (the default) lists the keys ELRepo signs this EL release with - EL 8/9 its original key and its'
             " v2 key, EL 10 only the v2 key (EL 10's rpm rejects the original key, and dnf then aborts the "
             'transaction).'),
            "Given keys are used as given, except that ELRepo's original key file is dropped on EL 10.",
        ],
    },
    'nodeprep_kernel_reboot_ok': {
        'type': 'bool',
        'default': None,
        'description': [
            'May the role reboot the node into the chosen kernel.',
            'Defaults to the collection-wide O(nodeprep_reboot_ok), which defaults to V(false).',
            ('The reboot uses C(nodeprep_boot_time_command) (default C(cat /proc/sys/kernel/random/boot_id)) to see '
             'that the node really restarted.'),
        ],
    },
    'nodeprep_reboot_ok': {
        'type': 'bool',
        'default': False,
        'description': [
            ('The collection-wide switch (the nvidia_driver role reads it too) that O(nodeprep_kernel_reboot_ok) '
             'follows when that is not set.'),
            ('Typed once like every variable of the role, so V(false) given as C(-e nodeprep_reboot_ok=false) is '
             'false.'),
        ],
    },
    'nodeprep_kernel_reboot_timeout': {
        'type': 'int',
        'default': 1800,
        'description': [
            'Seconds to wait for the node to come back after the reboot.',
        ],
    },
    'nodeprep_kernel_verify': {
        'type': 'bool',
        'default': True,
        'description': [
            ('Read the state back after the run and fail when the chosen kernel does not boot next (EL) or its devel'
             ' tree does not resolve. Skipped in check mode.'),
        ],
    },
}
# The collection-wide nodeprep_gpu_node: the role does nothing on a node that is not a GPU node (_gpu_node.py).
SETTINGS.update(_gpu_node.SETTINGS)

# Collection-wide variables among SETTINGS (not nodeprep_kernel_*; defaults/main.yml does not set them).
SHARED = ('nodeprep_reboot_ok', _gpu_node.NAME)


def os_vars_name(os_info):
    """The roles/kernel/vars file the role loads for this OS (its first_found chain), or 'default'."""
    candidates = ['{0}_{1}'.format(os_info.get('distribution'), os_info.get('distribution_version')),
                  '{0}_{1}'.format(os_info.get('distribution'), os_info.get('distribution_major_version')),
                  os_info.get('distribution'), os_info.get('os_family')]
    return next((name for name in candidates if name in OS_VARS), 'default')


def os_vars(os_info):
    """The per-OS constants for this OS, with the OS facts filled into the package names."""
    chosen = OS_VARS[os_vars_name(os_info)]
    values = dict((key, os_info.get(key, '')) for key in ('distribution_version', 'distribution_major_version'))
    out = {'family': chosen['family'], 'sources': list(chosen['sources'])}
    for key in ('image_packages', 'devel_meta_packages'):
        out[key] = dict((source, [name.format(**values) for name in names])
                        for source, names in (chosen.get(key) or {}).items())
    return out


def reboot_ok(settings):
    """May the role reboot: nodeprep_kernel_reboot_ok, else the collection-wide nodeprep_reboot_ok."""
    own = settings.get('nodeprep_kernel_reboot_ok')
    return bool(settings.get('nodeprep_reboot_ok') if own is None else own)


def work_settings(settings, chosen):
    """The settings _kernel.kernel_work reads (what the role's __nodeprep_kernel_work_settings held)."""
    source = settings['nodeprep_kernel_source']
    packages = list(chosen['image_packages'].get(source) or [])
    if settings['nodeprep_kernel_manage_devel']:
        packages += list(chosen['devel_meta_packages'].get(source) or [])
    return {'source': source, 'family': chosen['family'],
            'manage_devel': bool(settings['nodeprep_kernel_manage_devel']),
            'set_default': bool(settings['nodeprep_kernel_set_default']), 'packages': packages}


def gather(settings):
    """The kernel subset (it carries the OS facts, kernel_state.os)."""
    request = _plan.new_gather()
    request['subsets'] = ['kernel']
    return request


def plan(facts, settings, context):
    """Whether the kernel role has work on the node: _kernel.kernel_work from the typed settings and the facts.

    ``args['kernel']`` holds what the role's tasks read: the OS family, the work settings, the ELRepo URL and
    whether a reboot is allowed."""
    out = _plan.new_plan(ROLE)
    kernel_state = facts.get('kernel_state') if isinstance(facts.get('kernel_state'), dict) else {}
    os_info = os_facts(facts)
    allowed = reboot_ok(settings)
    if os_info.get('os_family') is None or os_info.get('distribution_major_version') is None:
        # The role reads them with the setup module itself.
        out['reasons'] = ['kernel facts to gather']
        out['args']['kernel'] = None
        out['reboot'] = {'needed': False, 'why': [], 'allowed': allowed}
        return out
    chosen = os_vars(os_info)
    wanted = work_settings(settings, chosen)
    packages = facts.get('nodeprep_packages') if isinstance(facts.get('nodeprep_packages'), dict) else None
    out['reasons'] = kernel_work(kernel_state, wanted, packages)
    running = kernel_state.get('running') or ''
    nxt = kernel_state.get('default') or running
    why = [] if not nxt or nxt == running else [
        'kernel: running {0}, the kernel that boots next is {1}'.format(running, nxt)]
    out['reboot'] = {'needed': bool(why), 'why': why, 'allowed': allowed}
    out['args']['kernel'] = {
        'family': chosen['family'],
        'sources': chosen['sources'],
        'work_settings': wanted,
        'elrepo_url': settings['nodeprep_kernel_elrepo_url'] or ELREPO_URL.format(
            major=os_info.get('distribution_major_version'), arch=os_info.get('architecture') or 'x86_64'),
        'reboot_ok': allowed,
    }
    return out
