"""Who a connection is: principals, the SASL exchange and its mechanisms, TLS contexts.

``principal`` (KafkaPrincipal), ``authenticator`` (SaslServerAuthenticator: Kafka's
SASL state machine over request frames), ``sasl_plain`` and ``sasl_scram`` (the
mechanisms; SCRAM on scramp), ``scram_credentials`` (Kafka's stored SCRAM form),
``credential_cache`` (the SCRAM users of ``/config/users``), ``jaas`` (login module
configs), ``ssl_factory`` (contexts from PEM stores), ``principal_mapping``
(``ssl.principal.mapping.rules``). The listener wiring is ``server/listener_security.py``.
"""
