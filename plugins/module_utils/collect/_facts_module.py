# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The tail every facts module shares: collect, fail with the reader's message, warn, exit with only facts.

No Ansible import: ``module`` is the caller's AnsibleModule. A facts module ends with::

    run_facts_module(module, 'shm', lambda: collect_shm_facts(module, ...), (ShmError, OSError))

Readers report what they could not read in the namespace itself (``warnings``: lines skipped; ``errors``: files or
lines that leave the state unknown); both are passed on as warnings, and ``errors`` stays in the facts, so a check
that reads them can fail instead of trusting a partial state.  The text and the exception base they use live in
parsers/_facts_output.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


def fail_kwargs(exc, prefix=''):
    """Keyword arguments for fail_json() from a reader's exception: its own fail_kwargs() when it has one."""
    kwargs = exc.fail_kwargs() if hasattr(exc, 'fail_kwargs') else {'msg': str(exc)}
    kwargs = dict(kwargs)
    kwargs['msg'] = '{0}{1}'.format(prefix, kwargs.get('msg', exc))
    return kwargs


WARN_KEYS = ('warnings', 'errors')


def facts_warnings(facts, label='', keys=WARN_KEYS):
    """The ``warnings`` then the ``errors`` of a facts namespace, each prefixed by label (e.g. 'limits: ')."""
    found = []
    if isinstance(facts, dict):
        for key in keys:
            for text in facts.get(key) or []:
                found.append('{0}{1}'.format(label, text))
    return found


def exit_facts(module, ansible_facts, warnings=()):
    """Warn, then exit unchanged with ansible_facts (facts modules return nothing else)."""
    for warning in warnings:
        module.warn(warning)
    module.exit_json(changed=False, ansible_facts=ansible_facts)


def run_facts_module(module, namespace, collect, errors=(), prefix='', warn_keys=WARN_KEYS):
    """collect() the namespace; fail on one of ``errors`` with its message (after ``prefix``); warn; exit.

    warn_keys: the keys of the namespace whose lists are passed on as warnings (none for a namespace keyed by
    names, such as ``nics``).
    """
    try:
        facts = collect()
    except errors as exc:
        module.fail_json(**fail_kwargs(exc, prefix))
        raise  # fail_json exits; this is for fakes that do not
    exit_facts(module, {namespace: facts}, facts_warnings(facts, keys=warn_keys))
